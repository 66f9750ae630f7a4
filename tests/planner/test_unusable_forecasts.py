"""A forecast the planner cannot use falls back, by name, in both paths; reasons name what was read.

A NaN or infinite value in the steps a decision reads, or a forecast with no quantiles at all, is
not demand of zero: the workload is planned by its fallback (docs/planner.md), and the scale-down
stabilization still holds what the window asked for.
"""

from __future__ import annotations

import numpy as np
import pytest
from planner_helpers import service_policy

from planner.batch import decide_replicas_many
from planner.replicas import decide_replicas
from scaleahead.types import Forecast, WorkloadState

NOW = 1_000_000.0


def _both(policy, ws, fc):  # type: ignore[no-untyped-def]
    """(scalar decision, batch action, batch fallback); the batch plans a clean service beside it."""
    clean = Forecast(policy.workload, NOW, 10.0, {0.9: np.full(90, 30.0), 0.99: np.full(90, 40.0)})
    d = decide_replicas(policy.workload, policy.spec, ws, fc, NOW)
    actions, fallbacks = decide_replicas_many(
        [(policy.workload, policy.spec, ws, fc), (policy.workload, policy.spec, ws, clean)], NOW
    )
    assert fallbacks[1] is None and not actions[1].reason.code.startswith("fallback")
    return d, actions[0], fallbacks[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_value_in_the_read_steps_falls_back_and_keeps_the_stabilization(bad: float) -> None:
    policy = service_policy("web", minReplicas=1, scaleDownStabilizationSeconds=60)
    ws = WorkloadState(policy.workload, 10, 10, 35.0, NOW - 5, recent_desired=((NOW - 20, 10),))
    p99 = np.full(90, 850.0)
    p99[2] = bad  # 20 s ahead: inside the stabilization window
    fc = Forecast(policy.workload, NOW, 10.0, {0.9: np.full(90, 300.0), 0.99: p99})
    d, action, fallback = _both(policy, ws, fc)
    assert d.fallback == fallback == "reactive"
    assert d.action == action and action.reason.code == "fallback_reactive"
    assert action.to_replicas == 10  # held by the window, not scaled in to the 4 the observation needs
    assert action.reason.message.startswith("hold shop/web at 10: forecast not finite (NaN or infinite values")
    # The same value far beyond the steps read changes nothing.
    p99[2], p99[80] = 850.0, bad
    d, action, fallback = _both(policy, ws, Forecast(policy.workload, NOW, 10.0, {0.9: np.full(90, 300.0), 0.99: p99}))
    assert d.fallback is fallback is None and action.reason.code == "forecast" and action.to_replicas == 30


def test_a_forecast_without_quantiles_falls_back_without_failing_the_batch() -> None:
    policy = service_policy("web", fallback={"mode": "current"})
    ws = WorkloadState(policy.workload, 7, 7, 35.0, NOW - 5)
    d, action, fallback = _both(policy, ws, Forecast(policy.workload, NOW, 10.0, {}))
    assert d.fallback == fallback == "current" and d.action == action
    assert action.to_replicas == 7
    assert action.reason.message.startswith("hold shop/web at 7: empty forecast (no quantiles)")


def test_a_fallback_held_above_max_replicas_names_the_bound_not_a_forecast() -> None:
    policy = service_policy("web", maxReplicas=100, scaleDownStabilizationSeconds=60)
    ws = WorkloadState(policy.workload, 150, 150, 35.0, NOW - 5, recent_desired=((NOW - 30, 150),))
    d = decide_replicas(policy.workload, policy.spec, ws, None, NOW)
    (action,), _ = decide_replicas_many([(policy.workload, policy.spec, ws, None)], NOW)
    assert d.action == action and action.to_replicas == 100
    assert action.reason.message.endswith("held at 100 by 60 s scale-down stabilization (not above maxReplicas 100)")
    assert "forecast peak" not in action.reason.message


def test_reasons_name_the_quantile_level_that_was_read() -> None:
    fc_keys = {0.9: np.full(90, 100.0), 0.99: np.full(90, 150.0)}
    cases = [
        # the objective asks for less than the lowest quantile: the lowest one is read, and named
        ({"forecastQuantile": None, "objective": {"cost": 1, "sloRisk": 1}}, 10, "p90 forecast 100 req/s", "(p90: "),
        # a fixed level the forecast lacks: the nearest above it
        ({"forecastQuantile": 0.95}, 15, "p99 forecast 150 req/s", "(the forecast has no p95: the nearest above it)"),
        # above every level: the top one
        ({"forecastQuantile": 0.999}, 15, "p99 forecast 150 req/s", "(the forecast has no p99.9: its top one)"),
        # a level it has: nothing added
        ({"forecastQuantile": 0.9}, 10, "p90 forecast 100 req/s", "and 1 target"),
    ]
    for spec, replicas, said, tail in cases:
        policy = service_policy("web", **spec)
        ws = WorkloadState(policy.workload, 5, 5, 35.0, NOW - 5)
        fc = Forecast(policy.workload, NOW, 10.0, fc_keys)
        d = decide_replicas(policy.workload, policy.spec, ws, fc, NOW)
        actions, _ = decide_replicas_many([(policy.workload, policy.spec, ws, fc)] * 2, NOW)
        assert d.action == actions[0] == actions[1]
        message = d.action.reason.message
        assert d.action.to_replicas == replicas and said in message, message
        assert d.action.reason.details["quantile"] == float(said[1:3]) / 100
        assert (tail in message) if tail.startswith("(p90") else message.endswith(tail), message


def test_a_forecast_without_a_valid_time_falls_back_without_failing_the_batch() -> None:
    policy = service_policy("web", fallback={"mode": "current"})
    ws = WorkloadState(policy.workload, 7, 7, 35.0, NOW - 5)
    for origin, step in ((float("nan"), 10.0), (NOW, 0.0), (NOW, float("inf"))):
        fc = Forecast(policy.workload, origin, step, {0.9: np.full(90, 30.0), 0.99: np.full(90, 40.0)})
        d, action, fallback = _both(policy, ws, fc)
        assert d.fallback == fallback == "current" and d.action == action and action.to_replicas == 7
        assert "forecast without a valid time" in action.reason.message


def test_a_huge_finite_demand_is_capped_at_max_replicas_not_a_crash() -> None:
    # 1e308 / 0.5 per replica overflows to infinity though 1e308 is finite: ceil(inf) raised.
    policy = service_policy("web", capacityPerReplica=0.5, maxReplicas=10, maxStepUp=100)
    ws = WorkloadState(policy.workload, 3, 3, 10.0, NOW - 5)
    fc = Forecast(policy.workload, NOW, 10.0, {0.9: np.full(90, 1e308), 0.99: np.full(90, 1.5e308)})
    d, action, fallback = _both(policy, ws, fc)
    assert d.action == action and fallback is None
    assert action.to_replicas == 10 and action.reason.code == "forecast"
    assert action.reason.details["forecast_replicas"] > 10**308  # exact, not a stand-in
    # And a huge observed demand in the reactive fallback (no forecast).
    huge = WorkloadState(policy.workload, 3, 3, 1.7e308, NOW - 5)
    d = decide_replicas(policy.workload, policy.spec, huge, None, NOW)
    (action,), fallbacks = decide_replicas_many([(policy.workload, policy.spec, huge, None)], NOW)
    assert d.action == action and fallbacks == ["reactive"]
    assert action.to_replicas == 10 and action.reason.code == "fallback_reactive"


def test_one_service_with_a_huge_forecast_does_not_fail_the_plan_of_the_others() -> None:
    from planner import plan
    from scaleahead.types import ClusterState

    good, bad = service_policy("good"), service_policy("bad", capacityPerReplica=0.5)
    states = {p.workload: WorkloadState(p.workload, 3, 3, 10.0, NOW - 5) for p in (good, bad)}
    forecasts = {
        good.workload: Forecast(good.workload, NOW, 10.0, {0.9: np.full(90, 50.0), 0.99: np.full(90, 60.0)}),
        bad.workload: Forecast(bad.workload, NOW, 10.0, {0.9: np.full(90, 1e308), 0.99: np.full(90, 1e308)}),
    }
    result = plan(forecasts, ClusterState(workloads=states), [good, bad], NOW)
    assert [(a.workload.name, a.to_replicas) for a in result.actions] == [("good", 5), ("bad", 100)]  # type: ignore[union-attr]


@pytest.mark.parametrize("quantile", [0.9, None])  # a fixed level, or the objective's (every quantile read)
@pytest.mark.parametrize(
    ("make", "cause"),
    [
        # no steps at all (start-up 0: the start-up window ends at now, so "too short" did not catch it)
        (lambda: {0.5: np.zeros(0), 0.9: np.zeros(0), 0.99: np.zeros(0)}, "forecast too short (no steps)"),
        # the top quantile shorter than the others
        (lambda: {0.5: np.full(90, 40.0), 0.9: np.full(90, 50.0), 0.99: np.full(3, 60.0)}, "malformed forecast"),
        # an unread quantile (at the fixed p90) shorter: the forecast's horizon is read from the first one
        (lambda: {0.5: np.full(3, 40.0), 0.9: np.full(90, 50.0), 0.99: np.full(90, 60.0)}, "malformed forecast"),
        # one of them 2-D
        (lambda: {0.5: np.full((90, 1), 40.0), 0.9: np.full(90, 50.0), 0.99: np.full(90, 60.0)}, "malformed forecast"),
    ],
)
def test_an_empty_or_ragged_forecast_falls_back_in_both_paths(make, cause, quantile) -> None:  # type: ignore[no-untyped-def]
    policy = service_policy("web", startupSeconds=0, forecastQuantile=quantile)
    ws = WorkloadState(policy.workload, 5, 5, 40.0, NOW - 5)
    d, action, fallback = _both(policy, ws, Forecast(policy.workload, NOW, 10.0, make()))
    assert d.fallback == fallback == "reactive" and d.action == action
    assert action.reason.code == "fallback_reactive" and action.to_replicas == 4
    assert action.reason.message.startswith(f"scale shop/web 5 -> 4: {cause}"), action.reason.message


def test_a_ragged_forecast_does_not_fail_the_plan_of_the_others() -> None:
    from planner import plan
    from scaleahead.types import ClusterState

    good, bad = service_policy("good"), service_policy("bad")
    states = {p.workload: WorkloadState(p.workload, 3, 3, 10.0, NOW - 5) for p in (good, bad)}
    forecasts = {
        good.workload: Forecast(good.workload, NOW, 10.0, {0.9: np.full(90, 50.0), 0.99: np.full(90, 60.0)}),
        bad.workload: Forecast(bad.workload, NOW, 10.0, {0.9: np.full(90, 50.0), 0.99: np.full(3, 60.0)}),
    }
    result = plan(forecasts, ClusterState(workloads=states), [good, bad], NOW)
    assert [(a.workload.name, a.to_replicas) for a in result.actions] == [("good", 5), ("bad", 1)]  # type: ignore[union-attr]
    assert dict(result.fallbacks) == {bad.workload: "reactive"}


def test_the_reactive_hpa_caps_a_usage_that_overflows_instead_of_raising() -> None:
    # A finite demand far beyond a float's range over one replica's capacity: the risk reference and
    # the replay's HPA peer run this rule; ceil(inf) raised OverflowError for the whole cycle.
    import numpy as np

    from planner.reactive import Hpa

    hpa = Hpa(1e-300)
    want, why = hpa.recommend(1e308 / 1e-300, 2, 2)
    assert want == 2**31 - 1 and "vs target" in why
    replicas, _ = hpa.decide(0.0, np.full(6, 1e300), 2, 2)
    assert replicas == 6  # the scale-up policies still limit the step (max of +100 % and +4 pods)
