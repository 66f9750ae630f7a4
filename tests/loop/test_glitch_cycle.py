"""A glitch in a workload's history (a sample finite in float64 but beyond float32, such as 1e42)
in one control cycle, and a forecast that still comes out non-finite.

Observed before the fix (``run_once``, the tiny LSTM below, NASA demand at about 6 req/s): 1e42 in
the last hour made the LSTM forecast ~2e39 req/s and the cycle scaled 3 -> 103 replicas (its
maxReplicas) with the reason "p50 forecast 2,010,509,702,...,552 req/s"; 1e42 a day back made every
quantile NaN (the planner fell back, "forecast not finite"); seasonal-naive forecast 1e42 two
minutes ahead. Now a glitch is missing for every forecaster: the cycle plans exactly as with a NaN
there. A forecast that is still not finite is never acted on: the planner falls back by the
policy's named fallback and says why.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.lstm import LSTMConfig, LSTMForecaster
from forecaster.registry import make_model
from scaleahead.loop import CycleReport, Deps, run_once
from scaleahead.settings import Settings
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import Series
from tests.loop.test_cycle_batching import DAY, STEP, FixedHistory, _workloads

GLITCH = 1e42


def _histories(value: float) -> tuple[list, dict, float]:  # type: ignore[type-arg]
    """Three workloads (clean demand): ``value`` in w1's last hour and 2 minutes ahead of now a day
    back in w2 (the step seasonal-naive copies to now + 2 min, which the planner reads)."""
    policies, series, now = _workloads(4)
    policies = policies[1:]  # workload 0 ends in an outage: stale, planned by its fallback anyway
    out = {}
    for k, p in enumerate(policies):
        v = series[p.workload].values.copy()
        n = len(v)
        if k == 1:
            v[n - 30] = value
        if k == 2:
            v[n - int(DAY / STEP) + 12] = value
        s = series[p.workload]
        out[p.workload] = Series(s.name, s.start, s.step_s, v, s.unit)
    return policies, out, now


def _lstm() -> LSTMForecaster:
    # Untrained weights: the windowing, scaling and fallback code is the trained model's code.
    return LSTMForecaster.untrained(STEP, LSTMConfig(hidden=4, mlp=8, threads=1))


@pytest.mark.parametrize("model", ["lstm", "seasonal_naive"])
def test_a_cycle_plans_a_glitch_as_a_missing_sample(model: str) -> None:
    policies, glitch, now = _histories(GLITCH)
    _, missing, _ = _histories(np.nan)
    forecaster = _lstm() if model == "lstm" else make_model(model).fit(list(missing.values()))

    def cycle(history: dict) -> CycleReport:  # type: ignore[type-arg]
        deps = Deps(FixedHistory(history), forecaster, InMemoryTarget(default_replicas=3), None, policies)
        return run_once(deps, Settings(), now)

    a, b = cycle(glitch), cycle(missing)
    assert not a.errors and not a.plan.fallbacks
    for p in policies:
        fa, fb = a.forecasts[p.workload], b.forecasts[p.workload]
        for q in fa.quantiles:
            assert np.isfinite(fa.quantiles[q]).all() and fa.quantiles[q].max() < 1e3, (p.workload, q)
            np.testing.assert_allclose(fa.quantiles[q], fb.quantiles[q], rtol=1e-6)
    actions = {x.workload: (x.to_replicas, x.reason.code) for x in a.plan.actions}
    assert actions == {x.workload: (x.to_replicas, x.reason.code) for x in b.plan.actions}
    assert all(to < p.spec.max_replicas for p in policies for to, _ in [actions[p.workload]])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_forecast_that_still_comes_out_non_finite_is_never_acted_on(bad: float) -> None:
    """What the data's guards leave: a network that overflows inside. Every workload goes to its
    policy's named fallback, with the reason, and none is scaled on the forecast."""
    policies, series, now = _histories(1.0)
    model = _lstm()
    raw = model._raw_predict
    model._raw_predict = lambda seq, static: np.full_like(raw(seq, static), bad)  # type: ignore[method-assign]
    report = run_once(
        Deps(FixedHistory(series), model, InMemoryTarget(default_replicas=3), None, policies), Settings(), now
    )
    assert set(report.plan.fallbacks) == {p.workload for p in policies}
    for action in report.plan.actions:
        assert action.reason.code.startswith("fallback_"), action.reason
        assert "forecast not finite (NaN or infinite values in the steps it must cover)" in action.reason.message


@pytest.mark.parametrize("model", ["lstm", "seasonal_naive"])
def test_a_glitch_as_the_newest_sample_is_no_observed_demand(model: str) -> None:
    """Before, 1e42 as a workload's newest sample went through the observed demand to the reactive
    floor: the cycle scaled 3 -> 103 (its maxReplicas), "observed 166,666,...,824 req/s". Now the
    cycle reads it as missing, as the forecasters do: it plans as with NaN there."""
    policies, series, now = _workloads(4)
    policies = policies[1:]
    ref = policies[0].workload

    def with_last(value: float) -> dict:  # type: ignore[type-arg]
        out = dict(series)
        s = series[ref]
        v = s.values.copy()
        v[-1] = value
        out[ref] = Series(s.name, s.start, s.step_s, v, s.unit)
        return out

    glitch, missing = with_last(GLITCH), with_last(np.nan)
    forecaster = _lstm() if model == "lstm" else make_model(model).fit(list(missing.values()))

    def cycle(history: dict) -> CycleReport:  # type: ignore[type-arg]
        deps = Deps(FixedHistory(history), forecaster, InMemoryTarget(default_replicas=3), None, policies)
        return run_once(deps, Settings(), now)

    a, b = cycle(glitch), cycle(missing)
    actions = {x.workload: (x.to_replicas, x.reason.code, x.reason.message) for x in a.plan.actions}
    assert actions == {x.workload: (x.to_replicas, x.reason.code, x.reason.message) for x in b.plan.actions}
    assert actions[ref][0] < policies[0].spec.max_replicas
    assert "e+4" not in actions[ref][2] and "000,000,000" not in actions[ref][2]
