"""A sample finite in float64 but beyond float32 (a counter glitch such as 1e42) at prediction time.

Training has treated such a sample as missing since 2026-12-05; prediction read it. Observed before
the fix, with the tiny LSTM below: 1e42 in the last hour (the window the scale is taken from) gave
quantiles of ~2e40 (the control loop then scaled to maxReplicas); 1e42 a day back (its day window)
overflowed the network's float32 and every quantile was NaN; seasonal-naive copied 1e42 a day on,
window-mean and the ridge averaged it into ~1e40. Now every forecaster reads it as missing: the
forecast is exactly the one made with NaN there.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import QUANTILES, make_model
from forecaster.base import glitches_as_missing
from forecaster.lstm import LSTMConfig, LSTMForecaster
from scaleahead.types import F32_MAX, Series, WorkloadRef
from tests.forecaster.conftest import DAY, daily_series

GLITCH = 1e42
REF = WorkloadRef("Deployment", "default", "web")
AT = 3500  # origin index in a 3-day series of 60 s steps
# Steps before the origin: in the last hour (the scale's window and the recent window), and a day
# back (the LSTM's day window, and the very step seasonal-naive copies to the origin + 2).
WHERE = {"last hour": 5, "a day back": int(DAY / 60) - 2}


@pytest.fixture(scope="module")
def trained(tiny_lstm_config: LSTMConfig) -> LSTMForecaster:
    return LSTMForecaster(tiny_lstm_config).fit([daily_series(days=2.5)])


def _pair(before: int, value: float = GLITCH, level: float = 100.0) -> tuple[Series, Series]:
    """(the series with ``value`` ``before`` steps before the origin, the same with NaN there)."""
    s = daily_series(days=3.0, level=level)
    glitch, missing = s.values.copy(), s.values.copy()
    glitch[AT - before] = value
    missing[AT - before] = np.nan
    return Series(s.name, s.start, s.step_s, glitch, "req"), Series(s.name, s.start, s.step_s, missing, "req")


def test_the_threshold_is_float32s_and_shared_with_training() -> None:
    import forecaster.datamodule as dm

    assert dm.F32_MAX is F32_MAX  # make_windows' scaled-target check: one number, not two
    v = np.array([1.0, GLITCH, -GLITCH, np.inf, np.nan, 3e38])
    out = glitches_as_missing(v)
    assert np.isnan(out[1:5]).all() and out[0] == 1.0 and out[5] == 3e38
    clean = np.array([1.0, np.nan, 2.0])
    assert glitches_as_missing(clean) is clean  # nothing to change: no copy


@pytest.mark.parametrize("where", WHERE)
def test_the_lstm_reads_a_glitch_as_missing(trained: LSTMForecaster, where: str) -> None:
    glitch, missing = _pair(WHERE[where])
    a = trained.predict_origins(glitch, np.array([AT]), 15)
    b = trained.predict_origins(missing, np.array([AT]), 15)
    for q in QUANTILES:
        assert np.isfinite(a[q]).all(), f"{where}: {a[q]}"
        assert a[q].max() < 1000, f"{where}: {a[q]}"  # the level is 100
        np.testing.assert_allclose(a[q], b[q])
    origin = glitch.start + AT * glitch.step_s
    (f,) = trained.forecast_many([(REF, glitch.before(origin))], origin, 15)
    (g,) = trained.forecast_many([(REF, missing.before(origin))], origin, 15)
    for q in QUANTILES:
        assert np.isfinite(f.quantiles[q]).all(), f"{where}: {f.quantiles[q]}"
        np.testing.assert_allclose(f.quantiles[q], g.quantiles[q], rtol=1e-6)


def test_a_glitch_as_the_last_value_is_not_the_lstms_per_origin_fallback(trained: LSTMForecaster) -> None:
    """Every input window empty but for a glitch: the named fallback is the last *observed* value."""
    s = daily_series(days=3.0)
    v = s.values.copy()
    gap = int(1.1 * DAY / 60)  # past the day window (the week window lies before the series' start)
    v[AT - gap : AT] = np.nan
    v[AT - 3] = GLITCH
    last_seen = float(v[np.flatnonzero(np.isfinite(v[: AT - gap]))[-1]])
    series = Series(s.name, s.start, s.step_s, v, "req")
    out = trained.predict_origins(series, np.array([AT]), 15)
    assert trained.last_fallback_origins == 1
    origin = s.start + AT * s.step_s
    (f,) = trained.forecast_many([(REF, series.before(origin))], origin, 15)
    assert trained.last_fallback_origins == 1
    for q in QUANTILES:
        np.testing.assert_allclose(out[q], last_seen)
        np.testing.assert_allclose(f.quantiles[q], last_seen)


def test_a_window_whose_scaled_inputs_overflow_float32_takes_the_named_fallback(trained: LSTMForecaster) -> None:
    """1e37 is a float32, but over a scale of ~0.01 (a nearly idle service) it is 1e39 in the network's
    inputs: NaN quantiles before; now that origin gets the per-origin fallback (its last value)."""
    glitch, _ = _pair(WHERE["a day back"], value=1e37, level=0.01)
    assert F32_MAX > 1e37
    out = trained.predict_origins(glitch, np.array([AT]), 15)
    assert trained.last_fallback_origins == 1
    last_seen = float(glitch.values[np.flatnonzero(np.isfinite(glitch.values[:AT]))[-1]])
    for q in QUANTILES:
        assert np.isfinite(out[q]).all()
        np.testing.assert_allclose(out[q], last_seen)
    origin = glitch.start + AT * glitch.step_s
    (f,) = trained.forecast_many([(REF, glitch.before(origin))], origin, 15)
    assert trained.last_fallback_origins == 1
    for q in QUANTILES:
        np.testing.assert_allclose(f.quantiles[q], last_seen)


@pytest.mark.parametrize("name", ["naive", "seasonal_naive", "window_mean", "ridge"])
@pytest.mark.parametrize("where", WHERE)
def test_a_baseline_reads_a_glitch_as_missing(name: str, where: str) -> None:
    model = make_model(name).fit([daily_series(days=2.5)])
    glitch, missing = _pair(WHERE[where])
    a = model.predict_origins(glitch, np.array([AT]), 15)
    b = model.predict_origins(missing, np.array([AT]), 15)
    for q in QUANTILES:
        assert a[q].max() < 1000, f"{name}, {where}: {a[q]}"
        np.testing.assert_allclose(a[q], b[q])
    origin = glitch.start + AT * glitch.step_s
    (f,) = model.forecast_many([(REF, glitch)], origin, 15)
    for q in QUANTILES:
        np.testing.assert_allclose(f.quantiles[q], b[q][0])


@pytest.mark.parametrize("name", ["seasonal_naive", "ridge"])
def test_a_baseline_fitted_on_a_glitch_fits_as_on_a_missing_value(name: str) -> None:
    glitch, missing = _pair(WHERE["last hour"])
    a = make_model(name).fit([glitch]).predict_origins(missing, np.array([AT + 600]), 15)
    b = make_model(name).fit([missing]).predict_origins(missing, np.array([AT + 600]), 15)
    for q in QUANTILES:
        np.testing.assert_allclose(a[q], b[q])
