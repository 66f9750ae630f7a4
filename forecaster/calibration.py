"""Conditional quantiles: residual quantiles that depend on the forecast level.

Why it exists: the baselines add the *same* residual quantile to every forecast, at night as at the
daily peak. Request counts are close to Poisson (the spread grows like the square root of the
level) and CPU demand is noisier when it is high, so an additive band is too wide at night and too
narrow at the peak: the planner pays for replicas at night and still runs short at the peak.

``LevelCalibrated`` wraps any forecaster. On the history it takes the wrapped model's median as
the point forecast, bins the (origin, step) pairs by that level (equal-count bins) and keeps the
empirical residual quantiles per bin and horizon step. A forecast's quantile is its median plus
the residual quantile interpolated (linearly in the level) between the bins' median levels. Only
history is used to fit, and a forecast from origin ``t`` uses only values before ``t`` (the wrapped
model's guarantee), so there is no peeking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from forecaster.base import QUANTILES, Forecaster, fill_short_gaps, monotone_quantiles
from forecaster.baselines import Naive, WindowMean
from scaleahead.errors import DataError
from scaleahead.types import FloatArray, Series

#: Level bins: enough (x 90 steps) to resolve the shape, few enough that p99 has ~500 samples a bin.
N_BINS = 8
#: Fit origins per series (vectorised: cheap for the baselines).
FIT_ORIGINS = 4000


class WindowMean10m(WindowMean):
    """The mean of the last 10 minutes, repeated: a steadier point than the last value for counts."""

    name = "window_mean_10m"
    window_s = 600.0


class LevelCalibrated(Forecaster):
    """Median of a wrapped forecaster plus residual quantiles conditional on the forecast level."""

    def __init__(self, base: Forecaster, name: str, n_bins: int = N_BINS, fit_origins: int = FIT_ORIGINS) -> None:
        self.base = base
        self.name = name
        self.quantiles = QUANTILES
        self.n_bins = n_bins
        self.fit_origins = fit_origins
        self._centers: FloatArray | None = None  # [n_bins] median level per bin
        self._resid: dict[float, FloatArray] = {}  # q -> [n_bins, horizon]

    @property
    def needs_fit(self) -> bool:
        """As the wrapped model: a baseline started without history is fitted by the loop's first cycle."""
        return self.base.needs_fit

    def fit(self, history: Sequence[Series]) -> Forecaster:
        self.base.fit(history)
        levels, resids = [], []
        for s in history:
            h = max(1, int(round(900.0 / s.step_s)))
            values = fill_short_gaps(s.values)
            n = len(values)
            lo = min(n - h - 1, max(1, int(round(3600.0 / s.step_s))))
            if n - h <= lo or lo < 1:
                continue
            origins = np.unique(np.linspace(lo, n - h, num=min(self.fit_origins, n - h - lo), dtype=np.int64))
            seen = np.concatenate(([0], np.cumsum(np.isfinite(values))))
            origins = origins[seen[origins] > 0]  # only origins with an observed value before them
            if origins.size == 0:
                continue
            med = self._median(s, origins, h)  # [origins, h]
            actual = np.stack([values[o : o + h] for o in origins])  # [origins, h]
            levels.append(med)
            resids.append(actual - med)
        if not levels:
            return self
        level = np.concatenate(levels, axis=0)  # [rows, h]
        resid = np.concatenate(resids, axis=0)
        h = level.shape[1]
        ok = np.isfinite(resid) & np.isfinite(level)
        if not ok.any():  # no observed value after any origin (e.g. 50 minutes of data, then an outage)
            return self  # unfitted: the wrapped model's median without a band, as before a fit
        edges = np.nanquantile(np.where(ok, level, np.nan), np.linspace(0, 1, self.n_bins + 1))
        edges = np.unique(edges)
        nb = max(1, len(edges) - 1)
        bins = np.clip(np.searchsorted(edges, level, side="right") - 1, 0, nb - 1)
        centers = np.zeros(nb)
        out = {q: np.zeros((nb, h)) for q in self.quantiles}
        for b in range(nb):
            sel = (bins == b) & ok
            if sel.any():
                centers[b] = float(np.median(level[sel]))
            else:  # an empty bin (edges has nb + 1 entries, or one when every level is the same)
                centers[b] = (edges[b] + edges[min(b + 1, len(edges) - 1)]) / 2
            for j in range(h):
                r = resid[:, j][sel[:, j]]
                if r.size == 0:
                    r = resid[:, j][ok[:, j]]
                for q in self.quantiles:
                    out[q][b, j] = float(np.quantile(r, q)) if r.size else 0.0
        self._centers, self._resid = centers, out
        return self

    def _median(self, series: Series, origins: np.ndarray, horizon_steps: int) -> FloatArray:
        pred = self.base.predict_origins(series, origins, horizon_steps)
        key = 0.5 if 0.5 in pred else min(pred, key=lambda k: abs(k - 0.5))
        return pred[key]

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        med = self._median(series, origins, horizon_steps)
        if self._centers is None:
            # Never fitted on an observed value after an origin: quantiles equal to the median would be
            # a certainty the model never earned (as the baselines, ``Naive._points``).
            raise DataError(
                f"Model {self.name!r} has no forecast uncertainty: no history it was fitted on had an observed "
                "value within the forecast horizon after an origin with an hour of history before it.",
                "Give more history before the decision time (an hour plus the horizon with observed values): "
                "a later --at, or a longer history to fit on.",
            )
        out: dict[float, FloatArray] = {}
        fit_h = self._resid[self.quantiles[0]].shape[1]
        for q in self.quantiles:
            table = self._resid[q]
            band = np.empty_like(med)
            for j in range(horizon_steps):
                col = table[:, min(j, fit_h - 1)]
                band[:, j] = np.interp(med[:, j], self._centers, col)
            out[q] = np.maximum(med + band, 0.0)
        return monotone_quantiles(out)


def calibrated(base: Callable[[], Forecaster], name: str) -> Callable[[], Forecaster]:
    """A registry factory: ``base`` wrapped in ``LevelCalibrated`` under ``name``."""
    return lambda: LevelCalibrated(base(), name)


#: Registered by ``forecaster.registry``: name -> factory.
CALIBRATED: dict[str, Callable[[], Forecaster]] = {
    "calibrated_naive": calibrated(Naive, "calibrated_naive"),
    "calibrated_window_mean": calibrated(WindowMean, "calibrated_window_mean"),
    "calibrated_window_mean_10m": calibrated(WindowMean10m, "calibrated_window_mean_10m"),
}
