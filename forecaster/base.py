"""The one protocol every forecaster implements, learned or baseline.

A forecaster is fitted on history (never on data after the split) and then forecasts from any
origin ``t`` using only values strictly before ``t``. Horizon and context are in steps of the
series' own resolution; callers derive steps from seconds (``horizon_steps_for``).

Quantiles of point forecasters come from their own empirical residuals on the history, per
horizon step (EVALUATION.md section 3).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from scaleahead.errors import DataError
from scaleahead.types import F32_MAX, FloatArray, Forecast, Series, WorkloadRef, batch_forecasts

#: Quantiles every forecaster gives.
QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99)
#: Default horizon: 15 minutes.
HORIZON_S = 900.0
# F32_MAX (scaleahead.types): a sample beyond it is missing for every forecaster, in training and at
# prediction alike (``glitches_as_missing``); the LSTM also leaves out a window whose *scaled* inputs
# or targets go beyond it (``features.inputs_from_windows``, ``datamodule.make_windows``).


def horizon_steps_for(step_s: float, horizon_s: float = HORIZON_S) -> int:
    return max(1, int(round(horizon_s / step_s)))


def glitches_as_missing(values: FloatArray) -> FloatArray:
    """``values`` with every sample that is not finite in float32 (infinite, or beyond ``F32_MAX``
    such as a 1e42 glitch) as missing (NaN): the same array when there is none. As a demand it is
    never real, and read as a value it scales a forecast to ~1e40 or makes it NaN."""
    bad = np.abs(values) > F32_MAX  # inf too; NaN compares False
    if not bad.any():
        return values
    return np.where(bad, np.nan, values)


def without_glitches(series: Series) -> Series:
    """``series`` with its ``glitches_as_missing`` samples as NaN (the same object when there is none)."""
    values = glitches_as_missing(series.values)
    if values is series.values:
        return series
    return Series(series.name, series.start, series.step_s, values, series.unit)


def fill_short_gaps(values: FloatArray, max_gap: int = 3) -> FloatArray:
    """Linearly fill NaN runs of at most ``max_gap`` steps; longer gaps stay NaN."""
    out = values.copy()
    isnan = np.isnan(out)
    if not isnan.any():
        return out
    idx = np.arange(len(out))
    good = ~isnan
    if good.sum() < 2:
        return out
    filled = np.interp(idx, idx[good], out[good])
    # run lengths of NaN
    edges = np.diff(np.concatenate(([0], isnan.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    for s, e in zip(starts, ends, strict=True):
        if e - s <= max_gap and s > 0 and e < len(out):
            out[s:e] = filled[s:e]
    return out


def fill_short_gaps_causal(values: FloatArray, max_gap: int = 3) -> FloatArray:
    """Carry the last value into the first ``max_gap`` steps of every NaN run (uses only the past).

    Unlike ``fill_short_gaps`` (which interpolates and therefore reads the value *after* a gap),
    this is safe for forecasting: the filled value at ``i`` depends only on ``values[:i]``.
    """
    out = values.copy()
    isnan = np.isnan(out)
    if not isnan.any():
        return out
    idx = np.where(~isnan, np.arange(len(out)), -1)
    last = np.maximum.accumulate(idx)
    age = np.arange(len(out)) - last
    fill = isnan & (last >= 0) & (age <= max_gap)
    out[fill] = out[last[fill]]
    return out


def monotone_quantiles(qs: dict[float, FloatArray]) -> dict[float, FloatArray]:
    """Sort quantile values per step so that quantiles never cross."""
    keys = sorted(qs)
    stacked = np.sort(np.stack([qs[k] for k in keys], axis=0), axis=0)
    return {k: stacked[i] for i, k in enumerate(keys)}


def padded_history(workload: WorkloadRef, history: Series, origin: float) -> tuple[Series, int]:
    """``history`` before ``origin``, padded with NaN up to it, and the origin's index in it.

    Raises DataError when nothing usable lies before ``origin``.
    """
    past = history.before(origin)
    if len(past) == 0 or np.isnan(past.values).all():
        raise DataError(f"No usable history for {workload} before {origin:.0f}.", "Check the demand query.")
    # Pad the history up to the origin with NaN so that index arithmetic holds.
    i = past.index_of(origin)
    values = past.values
    if i > len(values):
        values = np.concatenate([values, np.full(i - len(values), np.nan)])
    return Series(past.name, past.start, past.step_s, values, past.unit), i


def common_cut(series: Sequence[Series], fraction: float) -> list[int]:
    """Per series, the index of one time cut shared by all: the last ``fraction`` of the span the
    series cover together is after it. A per-series cut (the last ``fraction`` of each) would put a
    shorter, newer series' training windows inside a longer one's validation span: a global model
    would be validated on the period it was trained on. Series of one resolution (the first's step);
    with one series, or series of equal span, it is ``int(len * (1 - fraction))``."""
    if not series:
        return []
    step = series[0].step_s
    g0 = min(s.start for s in series)
    offs = [int(round((s.start - g0) / step)) for s in series]
    total = max(o + len(s) for o, s in zip(offs, series, strict=True))
    cut = int(total * (1.0 - fraction))
    return [min(max(cut - o, 0), len(s)) for o, s in zip(offs, series, strict=True)]


class Forecaster(ABC):
    """Fit on history, forecast quantiles from any origin using only earlier data."""

    name: str = "forecaster"
    quantiles: tuple[float, ...] = QUANTILES

    @property
    def needs_fit(self) -> bool:
        """True while the model cannot forecast until it is fitted (a baseline that has seen no history yet)."""
        return False

    @abstractmethod
    def fit(self, history: Sequence[Series]) -> Forecaster:
        """Fit on the history series (each already cut at the split). Returns self."""

    @abstractmethod
    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        """Quantile forecasts for many origins of one series.

        Args:
            series: the full series; for origin index ``i`` only ``values[:i]`` may be used.
            origins: int indices into ``series.values`` (the first forecast step).
            horizon_steps: steps to forecast.

        Returns:
            ``{q: array [len(origins), horizon_steps]}``, non-negative, non-crossing.
        """

    def forecast(self, workload: WorkloadRef, history: Series, origin: float, horizon_steps: int) -> Forecast:
        """One forecast made at time ``origin`` from ``history`` (only values before ``origin`` are used)."""
        padded, i = padded_history(workload, history, origin)
        q = self.predict_origins(padded, np.array([i]), horizon_steps)
        start = padded.start + i * padded.step_s
        return Forecast(workload, start, padded.step_s, {k: v[0] for k, v in q.items()}, self.name)

    def forecast_many(
        self, items: Sequence[tuple[WorkloadRef, Series]], origin: float, horizon_steps: int
    ) -> list[Forecast]:
        """Forecasts for many workloads at one origin, as rows of one read-only batch (``QuantileRows``).

        Each workload is forecast alone and the results gathered into one ``[workloads, K, horizon]``
        array, which the planner reads without stacking; models that compute many at once override
        this to build the batch directly.
        """
        one = [self.forecast(w, s, origin, horizon_steps) for w, s in items]
        if not one:
            return one
        keys = sorted(one[0].quantiles)
        if any(sorted(f.quantiles) != keys for f in one):
            return one
        q = np.array([[f.quantiles[k] for k in keys] for f in one], dtype=np.float64)
        if q.ndim != 3:  # horizons differ
            return one
        return batch_forecasts(
            [f.workload for f in one], [f.origin for f in one], [f.step_s for f in one], q, keys, self.name
        )
