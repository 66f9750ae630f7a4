"""Level-calibrated quantiles (forecaster.calibration): these tests pin behaviour a mutation audit of
2026-12-07 found unpinned.

Most use a scripted wrapped model whose median is a known function of the values it forecasts (it
peeks: only the calibration's bookkeeping is under test), so every residual, level, bin edge and bin
centre is known by hand; the others wrap the real baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from forecaster.base import Forecaster
from forecaster.baselines import Naive, WindowMean
from forecaster.calibration import LevelCalibrated
from scaleahead.types import FloatArray, Series

#: The quantile the band tests read.
P90 = 0.9


class _Scripted(Forecaster):
    """A median ``level(actual)`` of the values at the forecast steps themselves (``actual``:
    ``[origins, horizon]``, its column ``j`` the values at step ``j``)."""

    name = "scripted"

    def __init__(self, level: Callable[[FloatArray], FloatArray]) -> None:
        self.level = level

    def fit(self, history: Sequence[Series]) -> Forecaster:
        return self

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        actual = np.stack([series.values[o : o + horizon_steps] for o in origins])
        return {0.5: self.level(actual)}


def _mapped(mapping: dict[float, float]) -> Callable[[FloatArray], FloatArray]:
    """Each value's level from ``mapping`` (values not in it are their own level)."""

    def level(actual: FloatArray) -> FloatArray:
        out = actual.copy()
        for v, lv in mapping.items():
            out[actual == v] = lv
        return out

    return level


def _pattern(cycle: list[float], n: int = 2000) -> Series:
    """``cycle`` repeated, at 10 s: every (origin, step) pair of the fit sees its values in its proportions."""
    return Series("p", 0.0, 10.0, np.resize(np.asarray(cycle, dtype=np.float64), n))


def _p90_at(model: LevelCalibrated, value: float, steps: int = 5) -> FloatArray:
    """The p90 of a forecast whose wrapped median is ``value``'s level, over ``steps`` steps."""
    q = model.predict_origins(Series("c", 0.0, 10.0, np.full(50, value)), np.array([10]), steps)
    return np.asarray(q[P90][0], dtype=np.float64)


def _assert_centers(model: LevelCalibrated, expected: list[float]) -> None:
    assert model._centers is not None
    np.testing.assert_allclose(model._centers, np.array(expected))


def _late_by_steps(actual: FloatArray) -> FloatArray:
    """A median ``j + 1`` below the value at step ``j``: a residual of ``j + 1`` at step ``j``, at every level."""
    return actual - (np.arange(actual.shape[1]) + 1.0)


def _flat(value: float, n: int, step_s: float) -> Series:
    return Series("flat", 0.0, step_s, np.full(n, value))


def test_calibration_pin_the_residual_table_covers_fifteen_minutes() -> None:
    # 10 s steps: 900 s is 90 steps. The median is j + 1 below the value at step j and the band adds
    # the j + 1 back at every one of the 90 steps (a 60-step table would add 60 from step 60 on).
    model = LevelCalibrated(_Scripted(_late_by_steps), "cal")
    model.fit([_flat(100.0, 1000, 10.0)])
    assert model._resid[P90].shape[1] == 90
    q = model.predict_origins(_flat(100.0, 200, 10.0), np.array([10]), 90)
    for k in (0.1, 0.5, P90, 0.99):
        np.testing.assert_allclose(q[k][0], np.full(90, 100.0))


def test_calibration_pin_history_that_starts_missing_fits_and_forecasts() -> None:
    # 1,000 missing steps (a metric that started late), then Poisson(5) data: the origins with nothing
    # observed before them are left out of the fit (Naive has nothing to forecast from there)
    rng = np.random.default_rng(7)
    values = np.concatenate([np.full(1000, np.nan), rng.poisson(5.0, 3000).astype(np.float64)])
    s = Series("late", 0.0, 10.0, values)
    model = LevelCalibrated(Naive(), "cal")
    model.fit([s])
    q = model.predict_origins(s, np.array([2000, 3999]), 90)
    assert all(np.isfinite(v).all() for v in q.values())
    assert (q[0.99] > q[0.5]).any()  # a band was learned


def test_calibration_pin_a_level_equal_to_a_bin_edge_is_in_the_upper_bin() -> None:
    # levels 1 (40 %), 2 (20 %) and 3 (40 %); two bins: edges 1, 2, 3. The values at level 2 are 12
    # (residual 10), the others on their level (residual 0). Level 2, on the edge, is in the upper bin:
    # {2, 3}, centre 3, p90 residual 10; the lower bin {1}, centre 1, residual 0.
    model = LevelCalibrated(_Scripted(_mapped({12.0: 2.0})), "cal", n_bins=2)
    model.fit([_pattern([1.0, 1.0, 12.0, 3.0, 3.0])])
    _assert_centers(model, [1.0, 3.0])
    np.testing.assert_allclose(_p90_at(model, 1.0), 1.0)
    np.testing.assert_allclose(_p90_at(model, 3.0), 13.0)


def test_calibration_pin_a_bin_empty_at_a_step_takes_the_pooled_residuals() -> None:
    # levels 1, 2, 3 (40/20/40 %) on their values, except at step 0 where every level is 1 (residuals
    # 0, 1 and 2 there): at step 0 the upper bin ({2, 3}, centre 3) is empty and takes the pooled p90
    # residual of step 0, 2; at the later steps its residual is 0.
    def level(actual: FloatArray) -> FloatArray:
        out = actual.copy()
        out[:, 0] = np.where(actual[:, 0] < 3.5, 1.0, actual[:, 0])
        return out

    model = LevelCalibrated(_Scripted(level), "cal", n_bins=2)
    model.fit([_pattern([1.0, 1.0, 2.0, 3.0, 3.0])])
    _assert_centers(model, [1.0, 3.0])
    p90 = _p90_at(model, 4.0)  # above the upper centre: its band
    np.testing.assert_allclose(p90, [6.0, 4.0, 4.0, 4.0, 4.0])


def test_calibration_pin_steps_past_the_fitted_horizon_keep_its_last_band() -> None:
    # 60 s steps: a 15-step table (900 s), residual j + 1 at step j. Forecast 30 steps: the band of
    # step j is j + 1 up to step 14, then step 14's 15; the median is 100 - (j + 1).
    model = LevelCalibrated(_Scripted(_late_by_steps), "cal")
    model.fit([_flat(100.0, 500, 60.0)])
    assert model._resid[P90].shape[1] == 15
    q = model.predict_origins(_flat(100.0, 100, 60.0), np.array([10]), 30)
    j = np.arange(30)
    expected = 100.0 - (j + 1) + np.minimum(j + 1, 15)
    assert list(expected[13:17]) == [100.0, 100.0, 99.0, 98.0]
    for k in (0.1, 0.5, P90, 0.99):
        np.testing.assert_allclose(q[k][0], expected)


@pytest.mark.parametrize("base", [Naive, WindowMean])
def test_calibration_pin_quantiles_of_a_poisson_series_are_never_negative(base: Callable[[], Forecaster]) -> None:
    rng = np.random.default_rng(3)
    s = Series("poisson", 0.0, 10.0, rng.poisson(1.0, 6000).astype(np.float64))
    model = LevelCalibrated(base(), "cal")
    model.fit([s])
    q = model.predict_origins(s, np.arange(400, 5900, 7), 90)
    assert min(float(v.min()) for v in q.values()) >= 0.0
    assert float(q[0.1].min()) == 0.0  # the band reaches below zero there: the quantile is cut at 0


def test_calibration_pin_a_bins_centre_is_its_median_level() -> None:
    # levels 0 (30 %), 1 (15 %), 10 (40 %) and 11 (15 %); two bins, edge 10 (the overall median):
    # {0, 1} has median level 0 (its mean is 1/3), {10, 11} median 10 (mean about 10.3). The values at
    # levels 10 and 11 are 20 and 21 (residual 10), the others on their level. Level 5 is half way
    # between the centres 0 and 10: band 5, p90 10.
    model = LevelCalibrated(_Scripted(_mapped({20.0: 10.0, 21.0: 11.0})), "cal", n_bins=2)
    cycle = [0.0] * 6 + [1.0] * 3 + [20.0] * 8 + [21.0] * 3
    model.fit([_pattern(cycle)])
    _assert_centers(model, [0.0, 10.0])
    np.testing.assert_allclose(_p90_at(model, 5.0), 10.0)
