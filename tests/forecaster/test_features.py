"""The LSTM's seasonal windows (``FeatureSpec.seasonal``) at every step size."""

from __future__ import annotations

import pytest

from forecaster.features import DAY_S, WEEK_S, FeatureSpec, Segment


@pytest.mark.parametrize("step_s", [10.0, 20.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0])
@pytest.mark.parametrize("lag_s", [DAY_S, WEEK_S])
def test_the_window_a_day_or_week_back_reads_the_lagged_forecast_steps(step_s: float, lag_s: float) -> None:
    """ "15 min before to 15 min after the lagged origin, so the model sees what happened over the
    horizon a day/week ago" (docs/forecaster.md). Found in review: at 10-, 30- and 60-minute steps
    the window, rounded on both sides, held only the step before the lagged origin."""
    spec = FeatureSpec(step_s=step_s)
    seg = spec.seasonal(lag_s)
    read = set(range(seg.start, seg.start + seg.bucket_len * seg.n_buckets))
    lag = spec.steps(lag_s)
    assert set(range(-lag, -lag + spec.horizon_steps)) <= read
    # and no step that starts more than 15 minutes before the lagged origin
    assert min(read) * step_s >= -lag * step_s - spec.seasonal_before_s - 1e-6


def test_steps_that_divide_15_minutes_keep_their_windows() -> None:
    """The shipped traces' steps (10 s, 60 s; 300 s for nab) read exactly what they read before."""
    assert FeatureSpec(step_s=10.0).seasonal(DAY_S) == Segment(-8730, 15, 12)
    assert FeatureSpec(step_s=60.0).seasonal(DAY_S) == Segment(-1455, 2, 15)
    assert FeatureSpec(step_s=300.0).seasonal(WEEK_S) == Segment(-2019, 1, 6)
