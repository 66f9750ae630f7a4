"""One contract suite run over every registered forecaster, learned or baseline.

Every model must give the quantiles of ``QUANTILES`` with the right shapes, non-negative and
non-crossing; must not peek (changing values at or after an origin changes nothing forecast from
it); must handle NaN gaps; and must refuse all-NaN history with a clear ``DataError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import QUANTILES, available_models, make_model
from forecaster.base import Forecaster
from scaleahead.errors import DataError, UserError
from scaleahead.types import QuantileRows, Series, WorkloadRef, batch_forecasts
from tests.forecaster.conftest import daily_series

H = 15  # 15 minutes at 60 s
#: Every registered model, plus the LSTM with the other setting of its ridge prior (the hybrid)
#: and of its ridge quantile blend.
MODELS = [*available_models(), "lstm_other_prior", "lstm_other_blend"]


def build(name: str, config) -> Forecaster:  # type: ignore[no-untyped-def]
    if name in ("lstm", "lstm_clock", "lstm_other_prior", "lstm_other_blend"):
        from dataclasses import replace

        from forecaster.lstm import LSTMForecaster
        from forecaster.registry import CLOCK_PERIOD_S

        if name == "lstm_clock":
            config = replace(config, clock_period_s=CLOCK_PERIOD_S)

        if name == "lstm_other_prior":
            config = replace(config, prior="none" if config.prior == "ridge" else "ridge")
        if name == "lstm_other_blend":
            config = replace(config, blend=not config.blend)
        return LSTMForecaster(config)
    return make_model(name)


_FITTED: dict[str, Forecaster] = {}


@pytest.fixture
def fitted(request: pytest.FixtureRequest, tiny_lstm_config) -> Forecaster:  # type: ignore[no-untyped-def]
    name = request.param
    if name not in _FITTED:
        _FITTED[name] = build(name, tiny_lstm_config).fit([daily_series(days=2.5)])
    return _FITTED[name]


def test_every_baseline_and_the_lstm_are_registered() -> None:
    assert {"naive", "seasonal_naive", "window_mean", "ridge", "lstm"} <= set(MODELS)


def test_importing_the_registry_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, forecaster.registry, scaleahead.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_quantiles_have_the_right_shape_are_non_negative_and_never_cross(fitted: Forecaster) -> None:
    s = daily_series(days=3.0)
    origins = np.arange(int(2.6 * 1440), int(2.9 * 1440), 7)
    qs = fitted.predict_origins(s, origins, H)
    assert sorted(qs) == sorted(QUANTILES)
    stacked = np.stack([qs[q] for q in sorted(qs)])
    assert stacked.shape == (len(QUANTILES), len(origins), H)
    assert np.isfinite(stacked).all()
    assert (stacked >= 0).all()
    assert (np.diff(stacked, axis=0) >= -1e-9).all()


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_changing_values_at_or_after_the_origin_changes_nothing(fitted: Forecaster) -> None:
    s = daily_series(days=3.0)
    origin = int(2.7 * 1440)
    values = s.values.copy()
    values[origin - 2 : origin] = np.nan  # a short gap just before the origin must not read ahead
    before = Series(s.name, s.start, s.step_s, values)
    changed = values.copy()
    changed[origin:] = np.random.default_rng(1).uniform(0, 1e4, len(changed) - origin)
    after = Series(s.name, s.start, s.step_s, changed)
    a = fitted.predict_origins(before, np.array([origin]), H)
    b = fitted.predict_origins(after, np.array([origin]), H)
    for q in QUANTILES:
        np.testing.assert_array_equal(a[q], b[q])


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_origins_inside_and_after_a_long_gap_get_finite_forecasts(fitted: Forecaster) -> None:
    s = daily_series(days=3.0)
    values = s.values.copy()
    gap = int(2.5 * 1440)
    values[gap : gap + 180] = np.nan  # three hours missing
    s = Series(s.name, s.start, s.step_s, values)
    qs = fitted.predict_origins(s, np.array([gap + 60, gap + 179, gap + 200]), H)
    assert all(np.isfinite(qs[q]).all() for q in QUANTILES)


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_all_missing_history_is_a_clear_error(fitted: Forecaster) -> None:
    s = Series("empty", 1_700_000_000.0, 60.0, np.full(3000, np.nan))
    with pytest.raises(DataError, match="observed|missing|history"):
        fitted.predict_origins(s, np.array([2000]), H)


@pytest.mark.parametrize("name", MODELS)
def test_fitting_on_all_missing_history_fails_clearly_or_fits_nothing(name: str, tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    model = build(name, tiny_lstm_config)
    s = Series("empty", 1_700_000_000.0, 60.0, np.full(3000, np.nan))
    if name.startswith("lstm"):  # a learned model refuses to train on nothing
        with pytest.raises(DataError, match="all missing"):
            model.fit([s])
        return
    model.fit([s])  # a baseline learns no residuals, and then refuses to forecast from nothing
    with pytest.raises(DataError, match="no observed value"):
        model.predict_origins(s, np.array([2000]), H)


@pytest.mark.parametrize("name", MODELS)
def test_a_constant_series_gives_a_flat_finite_forecast(name: str, tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    s = Series("flat", 1_700_000_000.0, 60.0, np.full(2 * 1440, 7.0))
    model = build(name, tiny_lstm_config).fit([s])
    qs = model.predict_origins(s, np.array([1500, 2000]), H)
    assert all(np.isfinite(qs[q]).all() and (qs[q] >= 0).all() for q in QUANTILES)
    if not name.startswith("lstm"):  # baselines repeat the constant exactly; the tiny LSTM only approximately
        np.testing.assert_allclose(qs[0.5], 7.0, rtol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_a_series_shorter_than_the_context_is_refused_or_forecast_sensibly(name: str, tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    s = Series("short", 1_700_000_000.0, 60.0, np.array([5.0, 6.0, 7.0, 6.0, 5.0]))
    model = build(name, tiny_lstm_config)
    if name.startswith("lstm"):
        with pytest.raises(DataError, match="Too little usable history"):
            model.fit([s])
        return
    model.fit([s])
    # Five points cannot show a 15-step forecast's errors: no quantile may pretend to know them.
    with pytest.raises(DataError, match="no forecast uncertainty"):
        model.predict_origins(s, np.array([5]), H)


@pytest.mark.parametrize("name", [m for m in available_models() if not m.startswith("lstm")])
def test_a_history_shorter_than_the_models_context_still_gives_quantiles_with_a_spread(name: str) -> None:
    # Six hours at 60 s: shorter than seasonal-naive's day, longer than the 15-step horizon.
    s = daily_series(days=0.25, seed=3)
    model = make_model(name).fit([s])
    qs = model.predict_origins(s, np.array([len(s)]), H)
    assert all(np.isfinite(qs[q]).all() and (qs[q] >= 0).all() for q in QUANTILES)
    assert (qs[max(QUANTILES)] - qs[min(QUANTILES)]).min() > 0


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_forecast_many_matches_forecasting_each_workload_alone(fitted: Forecaster) -> None:
    """The same forecasts as one by one, given as rows of one read-only batch (planner/batch.py reads it)."""
    series = [daily_series(days=3.0, seed=k, level=10.0**k) for k in range(3)]
    origin = series[0].start + int(2.8 * 1440) * 60.0
    items = [(WorkloadRef("Deployment", "ns", f"w{k}"), s) for k, s in enumerate(series)]
    many = fitted.forecast_many(items, origin, H)
    for (ref, s), fc in zip(items, many, strict=True):
        one = fitted.forecast(ref, s, origin, H)
        assert fc.workload == ref
        assert fc.origin == one.origin == origin
        for q in QUANTILES:
            np.testing.assert_allclose(fc.quantiles[q], one.quantiles[q], rtol=1e-5, atol=1e-6)
    # ... as rows of one read-only [workloads, K, horizon] array, which the planner reads without stacking
    rows = [fc.quantiles for fc in many]
    assert all(isinstance(r, QuantileRows) for r in rows)
    batch = rows[0].batch  # type: ignore[attr-defined]
    assert all(r.batch is batch for r in rows) and [r.row for r in rows] == [0, 1, 2]  # type: ignore[attr-defined]
    assert batch.shape == (3, len(QUANTILES), H) and list(rows[0]) == sorted(QUANTILES)
    for k, r in enumerate(rows):
        for j, q in enumerate(sorted(QUANTILES)):
            np.testing.assert_array_equal(r[q], batch[k, j])
    with pytest.raises(ValueError, match="read-only"):
        rows[1][QUANTILES[0]][0] = 1.0  # a forecast cannot be changed behind the planner's back


@pytest.mark.parametrize("fitted", MODELS, indirect=True)
def test_forecast_many_with_a_series_without_history_is_the_same_clear_error(fitted: Forecaster) -> None:
    good = daily_series(days=3.0, seed=1, level=10.0)
    origin = good.start + int(2.8 * 1440) * 60.0
    empty = Series("gone", good.start, good.step_s, np.full(len(good), np.nan))
    with pytest.raises(DataError, match=r"(?i)no (usable history|observed value)"):  # the loop splits to isolate it
        fitted.forecast_many(
            [(WorkloadRef("Deployment", "ns", "ok"), good), (WorkloadRef("Deployment", "ns", "gone"), empty)], origin, H
        )


def test_quantile_rows_read_like_a_mapping_and_check_their_batch() -> None:
    refs = [WorkloadRef("Deployment", "ns", n) for n in ("a", "b")]
    q = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)  # keys given out of order below
    fcs = batch_forecasts(refs, [0.0, 0.0], [10.0, 10.0], q, (0.5, 0.1, 0.9), "m")
    b = fcs[1]
    assert list(b.quantiles) == [0.1, 0.5, 0.9] and len(b.quantiles) == 3 and 0.5 in b.quantiles
    assert 0.3 not in b.quantiles and b.horizon_steps == 4
    np.testing.assert_array_equal(b.quantiles[0.5], [12.0, 13.0, 14.0, 15.0])  # keys[0] of row 1
    np.testing.assert_array_equal(b.quantile(0.3), b.quantiles[0.5])  # the nearest above
    assert {k: v.tolist() for k, v in b.quantiles.items()}[0.1] == [16.0, 17.0, 18.0, 19.0]
    with pytest.raises(KeyError):
        b.quantiles[0.3]
    with pytest.raises(ValueError, match="shape"):
        batch_forecasts(refs, [0.0, 0.0], [10.0, 10.0], q[:, :2], (0.5, 0.1, 0.9))
    with pytest.raises(ValueError, match="one workload"):
        batch_forecasts(refs[:1], [0.0], [10.0], q, (0.5, 0.1, 0.9))


def test_an_unfitted_lstm_says_it_must_be_trained() -> None:
    from forecaster.lstm import LSTMForecaster

    with pytest.raises(UserError, match="trained"):
        LSTMForecaster().predict_origins(daily_series(), np.array([100]), H)
