"""The demand "observed now" that the reactive floor reads: an average over the last window.

The reactive floor (planner/replicas.py) never lets a forecast scale a service below what the
reactive rule needs for the load observed now. Like the Kubernetes HPA, which reads utilization
averaged over the last 60 s, it reads the demand averaged over the policy's
``observedWindowSeconds``: at 10 s resolution one noisy sample is not a change of load, and
reacting to it bought replicas that arrived after the spike had gone (docs/planner.md).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from scaleahead.types import FloatArray, Series

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


def observed_demand(series: Series, window_s: float) -> tuple[float, float] | None:
    """``(demand, observed_at)`` at the series' last finite sample, averaged over ``window_s``.

    ``observed_at`` is the end of that sample's step. None when the series has no finite value.
    """
    finite = np.flatnonzero(np.isfinite(series.values))
    if finite.size == 0:
        return None
    i = int(finite[-1])
    k = window_steps(series.step_s, window_s)
    tail = series.values[max(0, i - k + 1) : i + 1]
    return float(np.nanmean(tail)), series.start + (i + 1) * series.step_s


def aligned_counts(series: list[Series] | tuple[Series, ...], now: float, step: float, window_s: float) -> IntArray:
    """Counts ``[series, steps]`` of the last ``window_s`` before ``now`` (missing steps 0), oldest first.

    Every series is aligned on the grid that ends at ``now``: column -1 is the step just before it.
    """
    window = max(1, int(window_s / step))
    counts = np.zeros((len(series), window))
    for row, past in enumerate(series):
        end = past.index_of(now)  # may lie past the series' end when the newest points are missing
        lo = max(0, end - window)
        values = past.values[lo:end]
        counts[row, window - (end - lo) : window - (end - lo) + len(values)] = np.nan_to_num(values)
    out: IntArray = counts.astype(np.int64)
    return out
