"""WindowMean's point forecast: the mean of the observed values in the window before each origin,
each window's sum read from values near it only (one huge finite value no longer wipes out the
means of every later window through a cumulative sum over the whole series)."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.baselines import WindowMean
from forecaster.calibration import WindowMean10m


def reference_means(values: np.ndarray, origins: np.ndarray, w: int) -> np.ndarray:
    """Per origin: ``np.nanmean`` of the (clipped) window, or the last observed value before it."""
    out = np.empty(len(origins))
    for k, o in enumerate(origins):
        hi = min(max(o, 0), len(values))
        window = values[max(0, o - w) : hi]
        if np.isfinite(window).any():
            out[k] = np.nanmean(window)
        else:
            seen = np.flatnonzero(~np.isnan(values[:hi]))
            out[k] = values[seen[-1]] if seen.size else 0.0
    return out


@pytest.mark.parametrize("model", [WindowMean, WindowMean10m])
@pytest.mark.parametrize("trace", ["nasa-10s", "alibaba-cpu-10s"])
def test_window_mean_equals_a_per_origin_nanmean_on_a_real_trace(trace: str, model: type[WindowMean]) -> None:
    from scaleahead.traces import load_series

    s = load_series(trace)
    values = s.values
    if trace == "nasa-10s":
        values = values[230000:295000]  # the trace's long outage (NaN) is in 238155..286777
    w = int(round(model.window_s / s.step_s))
    n = len(values)
    missing = np.flatnonzero(np.isnan(values))
    assert missing.size > 0
    origins = np.unique(
        np.concatenate(
            [
                np.arange(0, 2 * w + 3),  # the start: empty and clipped windows
                np.arange(0, n + 1, 7),
                missing[:: max(1, missing.size // 500)],  # in gaps, and just after them
                missing[:: max(1, missing.size // 500)] + w // 2,
                missing[-1] + np.arange(0, 2 * w + 3),
                np.arange(n - w - 2, n + w // 3),  # up to and past the end: windows cut off by it
            ]
        )
    )
    origins = origins[(origins >= 0) & (origins <= n + w)]
    point = model().point(values, origins, 3, s.step_s)
    assert point.shape == (len(origins), 3)
    assert (point == point[:, :1]).all()
    expected = reference_means(values, origins, w)
    if trace == "nasa-10s":
        seen = np.concatenate(([0], np.cumsum(~np.isnan(values))))
        empty = seen[np.clip(origins, 0, n)] == seen[np.clip(origins - w, 0, n)]
        assert empty[origins > 0].any(), "some windows are all NaN (and fall back to the last observed value)"
    np.testing.assert_allclose(point[:, 0], expected, rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("w", [1, 5, 12, 360])
def test_one_huge_finite_value_spoils_only_the_windows_that_contain_it(w: int) -> None:
    rng = np.random.default_rng(3)
    n = 100 + 3 * w
    values = 100.0 + rng.normal(0.0, 3.0, n)
    values[10] = 1e37  # below the float32 limit: not a glitch, so it is averaged in where it is
    step_s = 3600.0 / w
    origins = np.arange(11 + w, n + 1)  # windows [o - w, o) all after index 10
    point = WindowMean().point(values, origins, 2, step_s)[:, 0]
    expected = reference_means(values, origins, w)
    assert np.all(np.abs(point - 100.0) < 20.0), "each later window's own mean, not 0 or garbage"
    np.testing.assert_allclose(point, expected, rtol=1e-12)
    containing = np.arange(11, 11 + w)  # the windows that contain index 10: its weight, once
    spoiled = WindowMean().point(values, containing, 1, step_s)[:, 0]
    np.testing.assert_allclose(spoiled, 1e37 / np.minimum(containing, w))


@pytest.mark.parametrize("seed", range(6))
def test_window_mean_on_random_lengths_windows_gaps_and_origins_past_either_end(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, w = int(rng.integers(1, 400)), int(rng.integers(1, 80))
    values = rng.lognormal(3.0, 1.0, n)
    values[rng.random(n) < rng.uniform(0.0, 0.6)] = np.nan
    origins = np.arange(-3, n + w + 4)
    point = WindowMean().point(values, origins, 1, 3600.0 / w)[:, 0]
    np.testing.assert_allclose(point, reference_means(values, origins, w), rtol=1e-12, atol=0.0)
