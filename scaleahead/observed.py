"""The demand "observed now" that the reactive floor reads: an average over the last window.

The reactive floor (planner/replicas.py) never lets a forecast scale a service below what the
reactive rule needs for the load observed now. Like the Kubernetes HPA, which reads utilization
averaged over the last 60 s, it reads the demand averaged over the policy's
``observedWindowSeconds``: at 10 s resolution one noisy sample is not a change of load, and
reacting to it bought replicas that arrived after the spike had gone (docs/planner.md).

The ramp floor reads a second summary of the same samples: the straight line fitted to the
demand of the last ``rampFloor.windowSeconds`` (``demand_trend``, ``rolling_trends``), whose slope
and significance say whether demand is rising steadily (docs/planner.md, "Ramp floor").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scaleahead.types import FloatArray, Series, Trend

IntArray = npt.NDArray[np.int64]


def window_steps(step_s: float, window_s: float) -> int:
    """Samples in a window of ``window_s`` seconds at ``step_s`` resolution (at least the last one)."""
    if not math.isfinite(window_s) or window_s <= 0 or step_s <= 0:
        return 1
    return max(1, int(math.ceil(window_s / step_s - 1e-9)))


def windowed_means(values: FloatArray, step_s: float, window_s: float) -> FloatArray:
    """For each index i, the mean of the finite values among ``values[i - k + 1 .. i]``.

    ``k = window_steps(step_s, window_s)``. Missing values (NaN) are left out of the mean; the result
    is NaN where ``values[i]`` itself is missing, so "the last finite sample" keeps its meaning.
    """
    v = np.asarray(values, dtype=np.float64)
    k = window_steps(step_s, window_s)
    finite = np.isfinite(v)
    if k == 1:
        return np.where(finite, v, np.nan)
    sums = np.concatenate(([0.0], np.cumsum(np.where(finite, v, 0.0))))
    counts = np.concatenate(([0], np.cumsum(finite)))
    i = np.arange(v.size)
    lo = np.maximum(0, i - k + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (sums[i + 1] - sums[lo]) / (counts[i + 1] - counts[lo])
    out: FloatArray = np.where(finite, means, np.nan)
    return out


def last_finite(values: FloatArray) -> int:
    """Index of the last finite value (-1 if none); the usual case, a finite last value, costs no scan."""
    n = len(values)
    if n and math.isfinite(values[n - 1]):
        return n - 1
    finite = np.flatnonzero(np.isfinite(values))
    return int(finite[-1]) if finite.size else -1


def observed_demand(series: Series, window_s: float) -> tuple[float, float] | None:
    """``(demand, observed_at)`` at the series' last finite sample, averaged over ``window_s``.

    ``observed_at`` is the end of that sample's step. None when the series has no finite value.
    """
    i = last_finite(series.values)
    if i < 0:
        return None
    k = window_steps(series.step_s, window_s)
    tail = series.values[max(0, i - k + 1) : i + 1]
    return float(np.nanmean(tail)), series.start + (i + 1) * series.step_s


def last_active_at(series: Series, lookback_s: float) -> float:
    """When the newest step with a value above 0 ended, among the ``lookback_s`` ending at the last finite sample.

    ``-inf`` when there is none there (looked for, not found); NaN when there is no finite sample.
    A function's last call, for the reactive fallback of its warm pool: only the keep-alive before
    the newest sample is looked at, so a day of history costs no scan.
    """
    i = last_finite(series.values)
    if i < 0:
        return math.nan
    k = window_steps(series.step_s, lookback_s)
    tail = np.asarray(series.values[max(0, i - k + 1) : i + 1], dtype=np.float64)
    active = np.flatnonzero(tail > 0)
    if not active.size:
        return -math.inf
    return series.start + (i - tail.size + 2 + int(active[-1])) * series.step_s


#: Fewest finite samples a trend is fitted to (two always fit a line exactly).
MIN_TREND_SAMPLES = 3
#: Cells (rows x window) of the sliding windows fitted at once by ``rolling_trends`` (bounds its memory).
_TREND_CELLS = 1 << 21


def _line_fits(windows: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Least-squares lines through the finite values of each row of ``windows`` ``[rows, k]``.

    Column ``p`` is the sample at position ``p`` (in steps, oldest first). Returns, per row, the
    line's value at position ``k`` (the end of the last column's step), its slope per step, the
    slope's t statistic (slope / standard error; ``inf`` for a rising perfect line, NaN or about 0
    for a flat one) and the number of samples fitted. The first three are NaN for a row with fewer
    than ``MIN_TREND_SAMPLES`` finite values or values so large that the sums overflow.
    """
    k = windows.shape[1]
    m = np.isfinite(windows)
    y = np.where(m, windows, 0.0)
    p = np.arange(k, dtype=np.float64)
    n = m.sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mp = (m * p).sum(axis=1) / n
        my = y.sum(axis=1) / n
        dp = np.where(m, p - mp[:, None], 0.0)
        dy = np.where(m, y - my[:, None], 0.0)
        sxx = (dp * dp).sum(axis=1)
        sxy = (dp * dy).sum(axis=1)
        syy = (dy * dy).sum(axis=1)
        slope = sxy / sxx
        sse = np.maximum(syy - slope * sxy, 0.0)
        se = np.sqrt(sse / (n - 2) / sxx)
        t = np.where(se > 0, slope / se, np.where(slope > 0, np.inf, np.where(slope < 0, -np.inf, np.nan)))
        level = my + slope * (k - mp)
    bad = (n < MIN_TREND_SAMPLES) | ~(sxx > 0) | ~np.isfinite(syy) | ~np.isfinite(level)
    nan = np.full(windows.shape[0], np.nan)
    return np.where(bad, nan, level), np.where(bad, nan, slope), np.where(bad, nan, t), n


def rolling_trends(values: FloatArray, step_s: float, window_s: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For each index i, the line fitted to the finite values among ``values[i - k + 1 .. i]``.

    ``k = window_steps(step_s, window_s)``. Returns ``(level, slope, t_stat)`` arrays: the line's
    value at the end of step i, its rise per second and the slope's t statistic; NaN where
    ``values[i]`` is missing or the window has fewer than ``MIN_TREND_SAMPLES`` finite values (as
    ``windowed_means``, so "the last finite sample" keeps its meaning). The same numbers as
    ``demand_trend`` on the series cut after i.
    """
    v = np.asarray(values, dtype=np.float64)
    k = window_steps(step_s, window_s)
    level = np.full(v.size, np.nan)
    slope = np.full(v.size, np.nan)
    t = np.full(v.size, np.nan)
    if v.size == 0:
        return level, slope, t
    padded = np.concatenate((np.full(k - 1, np.nan), v))
    windows = np.lib.stride_tricks.sliding_window_view(padded, k)
    rows = max(1, _TREND_CELLS // k)
    for c0 in range(0, v.size, rows):
        c1 = min(v.size, c0 + rows)
        level[c0:c1], slope[c0:c1], t[c0:c1], _ = _line_fits(windows[c0:c1])
    missing = ~np.isfinite(v)
    level[missing] = slope[missing] = t[missing] = np.nan
    return level, slope / step_s, t


class RollingTrends:
    """``rolling_trends`` of a whole series, read as :class:`Trend` objects (the replays' states)."""

    def __init__(self, series: Series, window_s: float) -> None:
        self.series = series
        self.window_s = window_s if math.isfinite(window_s) and window_s > 0 else 0.0
        if self.window_s > 0:
            self.level, self.slope, self.t_stat = rolling_trends(series.values, series.step_s, self.window_s)
            k = window_steps(series.step_s, self.window_s)
            finite = np.isfinite(series.values)
            counts = np.concatenate(([0], np.cumsum(finite)))
            idx = np.arange(finite.size)
            self.samples = counts[idx + 1] - counts[np.maximum(0, idx - k + 1)]

    def at(self, j: int) -> Trend | None:
        """The trend of the window ending at sample ``j`` (as ``demand_trend`` of the series cut after it)."""
        if self.window_s <= 0 or j < 0:
            return None
        slope = float(self.slope[j])
        if not math.isfinite(slope):
            return None
        s = self.series
        return Trend(
            float(self.level[j]),
            slope,
            float(self.t_stat[j]),
            s.start + (j + 1) * s.step_s,
            self.window_s,
            int(self.samples[j]),
        )


def demand_trends(items: Sequence[tuple[Series, float]]) -> list[Trend | None]:
    """``demand_trend`` of many ``(series, window_s)`` at once: one least-squares pass per window length.

    The control loop's cycle fits every service's trend this way (a pass for one series costs about
    as much as for a thousand).
    """
    out: list[Trend | None] = [None] * len(items)
    groups: dict[int, list[tuple[int, FloatArray, float, float, float]]] = {}
    for idx, (series, window_s) in enumerate(items):
        if not math.isfinite(window_s) or window_s <= 0:
            continue
        i = last_finite(series.values)
        if i < 0:
            continue
        k = window_steps(series.step_s, window_s)
        tail = np.asarray(series.values[max(0, i - k + 1) : i + 1], dtype=np.float64)
        at = series.start + (i + 1) * series.step_s
        groups.setdefault(k, []).append((idx, tail, at, series.step_s, window_s))
    for k, rows in groups.items():
        block = np.full((len(rows), k), np.nan)
        for r, (_, tail, _, _, _) in enumerate(rows):
            block[r, k - tail.size :] = tail
        level, slope, t, n = _line_fits(block)
        for r, (idx, _, at, step_s, window_s) in enumerate(rows):
            if math.isfinite(slope[r]):
                out[idx] = Trend(float(level[r]), float(slope[r]) / step_s, float(t[r]), at, window_s, int(n[r]))
    return out


def demand_trend(series: Series, window_s: float) -> Trend | None:
    """The line fitted to the series' finite samples of the ``window_s`` ending at its last finite one.

    None when ``window_s`` is 0 (the ramp floor is off), the series has no finite value, or the
    window holds fewer than ``MIN_TREND_SAMPLES`` finite samples.
    """
    return demand_trends([(series, window_s)])[0]


#: The largest count ``aligned_counts`` gives a step (a larger finite value is capped to it, not cast
#: past int64's range).
MAX_COUNT = float(2**53)


def aligned_counts(series: list[Series] | tuple[Series, ...], now: float, step: float, window_s: float) -> IntArray:
    """Counts ``[series, steps]`` of the last ``window_s`` before ``now`` (missing steps 0), oldest first.

    Every series is aligned on the grid that ends at ``now``: column -1 is the step just before it.
    A non-finite value (NaN, +-Inf) is missing, so 0; one above ``MAX_COUNT`` is ``MAX_COUNT``.
    A value is a number of calls in its step, rounded to the nearest whole call, and any value
    above 0 is at least one call: PromQL's ``increase()`` extrapolates (0.9999 for one call) and a
    ``rate()`` gives calls per second (0.0167 for one a minute), and either truncated would read as
    no call at all (docs/serverless.md).
    """
    window = max(1, int(window_s / step))
    counts = np.zeros((len(series), window))
    for row, past in enumerate(series):
        # The samples [end - window, end) of the series, clamped to those it has: ``end`` may lie past
        # its end (the newest points are missing) or before its start (a function first seen after
        # ``now``: none of its samples is before it, so its row stays 0 and nothing after ``now`` is read).
        end = past.index_of(now)
        j0 = end - window
        lo, hi = max(0, j0), min(len(past), max(end, 0))
        if hi > lo:
            counts[row, lo - j0 : hi - j0] = past.values[lo:hi]
    # NaN and +-Inf are missing (0): an infinite count says nothing about the calls (a query dividing
    # by zero), and cast to int64 +Inf read as -9.2e18 calls (found in review). A finite value too
    # large for int64 is capped: only whether a step had calls matters to the forecaster.
    counts[~np.isfinite(counts)] = 0.0
    np.minimum(counts, MAX_COUNT, out=counts)
    out: IntArray = np.where(counts > 0, np.maximum(1.0, np.rint(counts)), 0.0).astype(np.int64)
    return out
