"""A baseline fitted on each series alone: ``PerSeries``.

The baselines (naive, seasonal-naive, window mean, ridge and their calibrated forms) learn their
quantiles from their own errors, in the series' units: a residual of 50 req/s is 50 req/s. Fitted
on several workloads at once (``scaleahead run`` fits the model on every workload's history), they
pooled the errors of all of them: a 10 req/s workload beside a 10,000 req/s one got a p90 of
1,236 (fitted alone: 11.4), and ridge one regression in raw units across both (its median 79
instead of 8.8). Series at different steps (a 10 s and a 60 s workload: 90 and 15 steps of
residuals) could not be pooled at all, and ``run`` failed at start-up. Until 2026-12-07 (a review).

``PerSeries`` keeps one model per series (by name and step; the control loop names each series
after its workload): each workload's forecast comes from the model fitted on its own history.
Fitted on one series it is that series' model, so every single-series benchmark is unchanged. A
series it was not fitted on (a workload added since, or another trace) is forecast by the model of
the fitted series at the same step whose recent level (the median of its last hour) is closest to
its own, so its errors are at least in that magnitude; with no series at that step, the nearest
level at any step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from forecaster.base import Forecaster
from scaleahead.types import FloatArray, Forecast, Series, WorkloadRef

Key = tuple[str, float]

#: The recent level a series is matched by: the median of its last hour of observed values.
LEVEL_WINDOW_S = 3600.0


def recent_level(series: Series, end: int | None = None) -> float:
    """The median of the last hour of ``series`` before index ``end`` (NaN if none is observed)."""
    stop = len(series) if end is None else max(0, min(end, len(series)))
    n = max(1, int(round(LEVEL_WINDOW_S / series.step_s)))
    window = series.values[max(0, stop - n) : stop]
    window = window[np.isfinite(window)]
    return float(np.median(window)) if window.size else math.nan


class PerSeries(Forecaster):
    """One ``make()`` model per fitted series; forecasts dispatched by the series' name and step."""

    def __init__(self, make: Callable[[], Forecaster]) -> None:
        self._make = make
        proto = make()
        self.name = proto.name
        self.quantiles = proto.quantiles
        self._proto = proto  # unfitted: answers ``needs_fit`` until the first fit
        self._members: dict[Key, Forecaster] = {}
        self._fitted: dict[Key, Forecaster] = {}  # the members a fit left fitted
        self._levels: dict[Key, float] = {}

    @property
    def needs_fit(self) -> bool:
        if not self._members:
            return self._proto.needs_fit
        return not self._fitted

    @property
    def members(self) -> dict[Key, Forecaster]:
        """The fitted models, by (series name, step)."""
        return dict(self._members)

    def fit(self, history: Sequence[Series]) -> Forecaster:
        groups: dict[Key, list[Series]] = {}
        for s in history:
            groups.setdefault((s.name, float(s.step_s)), []).append(s)
        members: dict[Key, Forecaster] = {}
        levels: dict[Key, float] = {}
        for key, group in groups.items():
            members[key] = self._make().fit(group)
            levels[key] = recent_level(group[-1])
        self._members, self._levels = members, levels
        self._fitted = {k: m for k, m in members.items() if not m.needs_fit}
        return self

    def _member(self, series: Series, end: int | None = None) -> Forecaster:
        """The model for ``series``: its own, else the nearest recent level's at its step (or any).

        Only fitted models are chosen: a series too short to fit on at start-up (a workload
        deployed minutes before) would otherwise keep its own unfitted model, which refuses every
        forecast, and the loop refits only while every model is unfitted (a review, 2026-12-07).
        Its forecasts then come from the nearest level's fitted model until the next fit."""
        key = (series.name, float(series.step_s))
        own = self._members.get(key)
        if own is not None and not own.needs_fit:
            return own
        fitted = self._fitted
        if not fitted:
            return own or self._proto  # unfitted: it says so (DataError) as a baseline always did
        if len(fitted) == 1:
            return next(iter(fitted.values()))
        level = recent_level(series, end)
        same = [k for k in fitted if k[1] == key[1]] or list(fitted)

        def distance(k: Key) -> tuple[float, str]:
            theirs = self._levels.get(k, math.nan)
            if not (math.isfinite(level) and math.isfinite(theirs)):
                return (math.inf, k[0])
            return (abs(math.log1p(max(level, 0.0)) - math.log1p(max(theirs, 0.0))), k[0])

        return fitted[min(same, key=distance)]

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        end = int(np.min(origins)) if len(origins) else None  # only values before every origin
        return self._member(series, end).predict_origins(series, origins, horizon_steps)

    def forecast(self, workload: WorkloadRef, history: Series, origin: float, horizon_steps: int) -> Forecast:
        return self._member(history, history.index_of(origin)).forecast(workload, history, origin, horizon_steps)

    def forecast_many(
        self, items: Sequence[tuple[WorkloadRef, Series]], origin: float, horizon_steps: int
    ) -> list[Forecast]:
        """Each workload by its own model; one batch per model, in ``items``' order."""
        if not items:
            return []
        chosen = [self._member(s, s.index_of(origin)) for _, s in items]
        first = chosen[0]
        if all(m is first for m in chosen):
            return first.forecast_many(items, origin, horizon_steps)
        by_model: dict[int, list[int]] = {}
        for i, m in enumerate(chosen):
            by_model.setdefault(id(m), []).append(i)
        out: list[Forecast | None] = [None] * len(items)
        for idx in by_model.values():
            model = chosen[idx[0]]
            for i, fc in zip(idx, model.forecast_many([items[i] for i in idx], origin, horizon_steps), strict=True):
                out[i] = fc
        return [fc for fc in out if fc is not None]
