"""Level-calibrated quantiles (forecaster.calibration) on a slice of the real nasa-10s trace."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.registry import make_model
from scaleahead.traces import load_series
from scaleahead.types import Series

DAY = 8640


@pytest.fixture(scope="module")
def nasa_four_days() -> Series:
    """Days 11-14 of nasa-10s (July 1995), a stretch without long outages."""
    full = load_series("nasa-10s")
    a = 10 * DAY
    return Series("nasa-4d", full.start + a * full.step_s, full.step_s, full.values[a : a + 4 * DAY].copy(), full.unit)


def _coverage_by_level(model_name: str, s: Series) -> tuple[float, float]:
    """p90 coverage 60 s ahead on day 4 (fitted on days 1-3), at low and at high forecast level."""
    model = make_model(model_name)
    model.fit([Series(s.name, s.start, s.step_s, s.values[: 3 * DAY], s.unit)])
    origins = np.arange(3 * DAY + 400, 4 * DAY - 20, 7)
    q = model.predict_origins(s, origins, 7)
    actual = s.values[origins + 6]
    med, p90 = q[0.5][:, 6], q[0.9][:, 6]
    ok = np.isfinite(actual)
    low = ok & (med <= np.quantile(med[ok], 0.3))
    high = ok & (med >= np.quantile(med[ok], 0.7))
    return float((actual[low] <= p90[low]).mean()), float((actual[high] <= p90[high]).mean())


def test_calibrated_quantiles_cover_about_as_well_at_low_and_high_levels(nasa_four_days: Series) -> None:
    plain_low, plain_high = _coverage_by_level("window_mean", nasa_four_days)
    cal_low, cal_high = _coverage_by_level("calibrated_window_mean", nasa_four_days)
    # The additive band over-covers the quiet hours and under-covers the busy ones ...
    assert plain_low - plain_high > 0.05
    # ... the level-conditional band narrows that gap and stays near 0.9 where it matters.
    assert abs(cal_low - cal_high) < (plain_low - plain_high) / 2
    assert cal_high > plain_high


def test_calibrated_band_is_wider_at_a_high_level_than_at_a_low_one(nasa_four_days: Series) -> None:
    model = make_model("calibrated_window_mean")
    model.fit([nasa_four_days])
    s = nasa_four_days
    origins = np.arange(DAY, 4 * DAY - 100, 97)
    q = model.predict_origins(s, origins, 90)
    width = q[0.9][:, 6] - q[0.5][:, 6]
    med = q[0.5][:, 6]
    assert width[med >= np.quantile(med, 0.8)].mean() > 1.3 * width[med <= np.quantile(med, 0.2)].mean()
    for a, b in ((0.1, 0.5), (0.5, 0.9), (0.9, 0.99)):
        assert (q[a] <= q[b] + 1e-12).all()
    assert (q[0.1] >= 0).all()


def test_a_calibrated_forecast_uses_only_values_before_its_origin(nasa_four_days: Series) -> None:
    s = nasa_four_days
    model = make_model("calibrated_naive")
    model.fit([Series(s.name, s.start, s.step_s, s.values[: 2 * DAY], s.unit)])
    origins = np.array([3 * DAY, 3 * DAY + 500])
    before = model.predict_origins(s, origins, 90)
    changed = s.values.copy()
    changed[3 * DAY + 500 :] *= 7.0
    after = model.predict_origins(Series(s.name, s.start, s.step_s, changed, s.unit), origins, 90)
    for k in before:
        np.testing.assert_allclose(before[k], after[k])
