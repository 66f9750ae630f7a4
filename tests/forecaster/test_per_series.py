"""The baselines are fitted on each series alone (``forecaster.per_series.PerSeries``).

Found by a review (2026-12-07): fitted on several workloads at once, as ``scaleahead run`` fits
them, the baselines pooled every workload's errors in absolute units (a 10 req/s workload beside a
10,000 req/s one got a p90 of about 1,236), ridge fitted one regression in raw units across them,
and workloads at different steps (10 s and 60 s) made the fit fail, so ``run`` failed at start-up."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import make_model
from forecaster.baselines import Naive, Ridge, SeasonalNaive, WindowMean
from forecaster.per_series import PerSeries, recent_level
from scaleahead.types import Series, WorkloadRef

BASELINES = ["naive", "seasonal_naive", "window_mean", "ridge", "calibrated_naive", "calibrated_window_mean"]
N = 8640 * 2  # two days at 10 s


def _series(name: str, level: float, noise: float, step_s: float = 10.0, n: int = N, seed: int = 0) -> Series:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return Series(name, 0.0, step_s, level * (1 + 0.2 * np.sin(t * step_s / 5000.0)) + rng.normal(0, noise, n))


SMALL = _series("shop/small", 10.0, 1.0)
BIG = _series("shop/big", 10_000.0, 1_000.0, seed=1)
COARSE = _series("shop/coarse", 10.0, 1.0, step_s=60.0, n=N // 6, seed=2)


def _q(model, series: Series) -> dict[float, np.ndarray]:  # type: ignore[no-untyped-def]
    out = model.predict_origins(series, np.array([len(series) - 100]), 6)
    return {q: v[0] for q, v in out.items()}


@pytest.mark.parametrize("name", BASELINES)
def test_a_small_workloads_quantiles_do_not_take_a_big_ones_errors(name: str) -> None:
    alone = _q(make_model(name).fit([SMALL]), SMALL)
    beside = _q(make_model(name).fit([SMALL, BIG]), SMALL)
    for q in alone:
        np.testing.assert_array_equal(beside[q], alone[q])
    assert beside[0.9].max() < 30.0, "the p90 stays near the small workload's level"


@pytest.mark.parametrize("name", BASELINES)
def test_workloads_at_different_steps_are_fitted_together_and_each_forecast_in_its_steps(name: str) -> None:
    model = make_model(name).fit([SMALL, COARSE])
    items = [(WorkloadRef("Deployment", "shop", "small"), SMALL), (WorkloadRef("Deployment", "shop", "coarse"), COARSE)]
    origin = SMALL.start + (len(COARSE) - 10) * 60.0
    for (ref, s), fc in zip(items, [model.forecast(r, s, origin, 15) for r, s in items], strict=True):
        assert fc.workload == ref and fc.step_s == s.step_s and len(fc.quantiles[0.9]) == 15
        assert np.isfinite(fc.quantiles[0.9]).all()


@pytest.mark.parametrize(("name", "plain"), [("naive", Naive), ("seasonal_naive", SeasonalNaive),
                                             ("window_mean", WindowMean), ("ridge", Ridge)])  # fmt: skip
def test_fitted_on_one_series_it_is_that_series_model(name: str, plain: type) -> None:
    """Every single-series benchmark (``bench forecast``, ``bench replay``) is unchanged."""
    wrapped, raw = make_model(name).fit([SMALL]), plain().fit([SMALL])
    other = _series("another-name", 12.0, 1.0, seed=5)  # a series it was not fitted on: the only model
    for s in (SMALL, other):
        a, b = _q(wrapped, s), _q(raw, s)
        for q in b:
            np.testing.assert_array_equal(a[q], b[q])


def test_many_workloads_are_forecast_in_order_each_by_its_own_model() -> None:
    model = make_model("naive").fit([SMALL, BIG])
    refs = [WorkloadRef("Deployment", "shop", n) for n in ("big", "small", "big2")]
    items = [(refs[0], BIG), (refs[1], SMALL), (refs[2], BIG)]
    origin = SMALL.start + (N - 100) * 10.0
    many = model.forecast_many(items, origin, 90)
    one = [model.forecast(r, s, origin, 90) for r, s in items]
    assert [f.workload for f in many] == refs
    for m, o in zip(many, one, strict=True):
        np.testing.assert_array_equal(m.quantiles[0.9], o.quantiles[0.9])
    assert many[1].quantiles[0.9].max() < 30.0 < many[0].quantiles[0.9].min()


def test_a_series_it_was_not_fitted_on_takes_the_model_of_the_nearest_level() -> None:
    model = make_model("naive").fit([SMALL, BIG])
    assert isinstance(model, PerSeries)
    new_big = _series("shop/new", 9_000.0, 900.0, seed=3)
    got, big = _q(model, new_big), _q(model.members[("shop/big", 10.0)], new_big)
    for q in got:
        np.testing.assert_array_equal(got[q], big[q])


def test_the_nearest_level_reads_only_values_before_the_origin() -> None:
    """No peeking: a new series whose level jumps after the origin is matched by its level before it."""
    model = make_model("naive").fit([SMALL, BIG])
    values = _series("shop/new", 10.0, 1.0, seed=4).values.copy()
    origin = N - 100
    values[origin:] = 10_000.0  # the future is the big workload's level
    jumped = Series("shop/new", 0.0, 10.0, values)
    assert recent_level(jumped, origin) < 20.0
    small = model.members[("shop/small", 10.0)]
    for q, v in _q(model, jumped).items():
        np.testing.assert_array_equal(v, _q(small, jumped)[q])


def test_an_unfitted_model_still_needs_a_fit() -> None:
    model = make_model("seasonal_naive")
    assert model.needs_fit
    assert not model.fit([SMALL]).needs_fit


def test_a_series_too_short_to_fit_on_is_forecast_by_a_fitted_model() -> None:
    """Found by a review: a workload deployed minutes before start-up kept its own unfitted model,
    which refused every forecast ("no forecast uncertainty"), and the loop refits only while every
    model is unfitted."""
    short = Series("shop/new", 0.0, 10.0, np.full(10, 11.0))
    for name in ("naive", "calibrated_naive"):
        model = make_model(name).fit([SMALL, short])
        assert not model.needs_fit
        at = np.array([len(short)])
        got = model.predict_origins(short, at, 6)
        want = model.members[("shop/small", 10.0)].predict_origins(short, at, 6)
        for q in want:
            np.testing.assert_array_equal(got[q], want[q])
