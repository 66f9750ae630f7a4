"""Planner and reactive-peer rules pinned where a mutation audit of 2026-12-07 found them
untested: the HPA peer's tolerance edge, its maxReplicas and its rounding; the objective's median
floor; the wording at the forecast's top quantile; the churn rule's boundary; the stabilization
sentence; a function-class policy without a warm pool is planned as a service."""

from __future__ import annotations

import numpy as np
from planner_helpers import flat_forecast, function_policy, service_policy

from planner import plan
from planner.reactive import Hpa, HpaConfig
from planner.replicas import decide_replicas, provision_levels
from scaleahead.types import ClusterState, Forecast, ScaleTo, WorkloadState

NOW = 1_000_000.0


def test_the_hpa_keeps_its_count_exactly_at_the_tolerance_edge() -> None:
    # usage 6.25 replicas over 10 ready at target 0.5: ratio 1.25, |1 - 1.25| = tolerance 0.25
    hpa = Hpa(1.0, HpaConfig(target_utilization=0.5, tolerance=0.25))
    assert hpa.recommend(6.25, 10, 10)[0] == 10
    assert hpa.recommend(6.3, 10, 10)[0] == 13  # just past it: ceil(1.26 x 10)


def test_the_hpa_never_goes_above_its_max_replicas() -> None:
    hpa = Hpa(1.0, HpaConfig(max_replicas=5))
    desired, _ = hpa.sync(NOW, np.array([1000.0]), 2, 2)
    assert desired == 5


def test_the_hpa_does_not_round_float_noise_up_to_another_replica() -> None:
    # 3.5 / 3 / 0.7 x 3 = 5.000000000000001 in floating point: 5 replicas, not 6
    assert Hpa(1.0).recommend(3.5, 3, 3)[0] == 5


def test_an_objective_that_weighs_cost_far_above_risk_provisions_the_median() -> None:
    q = np.array([[[40.0], [80.0], [100.0], [120.0]]])  # p0.1, p0.5, p0.9, p0.99
    x, level = provision_levels((0.1, 0.5, 0.9, 0.99), q, np.array([10.0]), np.array([1000.0]))
    assert float(level[0, 0]) == 0.5 and float(x[0, 0]) == 80.0


def test_demand_equal_to_the_top_quantile_is_not_called_a_missed_forecast() -> None:
    # p99 = 1.2 x 25 = 30 req/s, observed exactly 30: the forecast did not miss; the floor still holds
    pol = service_policy(targetUtilization=0.5, maxStepUp=100)
    ws = WorkloadState(pol.workload, 4, 4, observed_demand=30.0, observed_at=NOW - 5)
    action = plan({pol.workload: flat_forecast(pol.workload, NOW, 25.0)}, ClusterState({pol.workload: ws}), [pol], NOW)
    (a,) = action.actions
    assert isinstance(a, ScaleTo) and (a.to_replicas, a.reason.code) == (6, "reactive_floor")
    assert "the forecast missed" not in a.reason.message
    assert "more than the 5 the p90 forecast needs" in a.reason.message
    # the reference path (planner/batch.py hands it the rows it does not vectorize) words it the same
    ref = decide_replicas(pol.workload, pol.spec, ws, flat_forecast(pol.workload, NOW, 25.0), NOW).action
    assert ref.reason.message == a.reason.message
    ws = WorkloadState(pol.workload, 4, 4, observed_demand=30.5, observed_at=NOW - 5)
    (a,) = plan(
        {pol.workload: flat_forecast(pol.workload, NOW, 25.0)}, ClusterState({pol.workload: ws}), [pol], NOW
    ).actions
    assert "(the forecast missed)" in a.reason.message


def _scale_down(churn: float) -> ScaleTo:
    # 5 -> 4 saves 1 replica x cost 1 x 300 s (the stabilization window) = 300 replica-seconds
    pol = service_policy(
        scaleDownStabilizationSeconds=300, objective={"cost": 1.0, "sloRisk": 80.0, "churn": churn}, maxStepDown=10
    )
    ws = WorkloadState(pol.workload, 5, 5, observed_demand=1.0, observed_at=NOW - 5)
    fc = flat_forecast(pol.workload, NOW, 40.0)
    (a,) = plan({pol.workload: fc}, ClusterState({pol.workload: ws}), [pol], NOW).actions
    ref = decide_replicas(pol.workload, pol.spec, ws, fc, NOW).action  # the reference path decides alike
    assert isinstance(a, ScaleTo) and ref.to_replicas == a.to_replicas
    return a


def test_a_scale_down_that_saves_exactly_two_scale_events_is_made() -> None:
    assert _scale_down(150.0).to_replicas == 4  # saving 300 = 2 x 150
    assert _scale_down(150.5).to_replicas == 5


def test_the_stabilization_sentence_names_the_count_kept_not_the_windows_higher_one() -> None:
    # the window holds a desired 8, above the current 5: the count kept is 5
    pol = service_policy(scaleDownStabilizationSeconds=300, objective={"churn": 0.0}, maxStepDown=10)
    ws = WorkloadState(pol.workload, 5, 5, observed_demand=1.0, observed_at=NOW - 5, recent_desired=((NOW - 100, 8),))
    fc = Forecast(pol.workload, NOW, 10.0, {0.5: np.full(90, 16.0), 0.9: np.full(90, 20.0), 0.99: np.full(90, 200.0)})
    (a,) = plan({pol.workload: fc}, ClusterState({pol.workload: ws}), [pol], NOW).actions
    assert isinstance(a, ScaleTo) and a.to_replicas == 5
    assert "held at 5 by 300 s scale-down stabilization" in a.reason.message, a.reason.message


def test_a_function_policy_without_a_warm_pool_is_planned_as_a_service() -> None:
    pol = function_policy(enabled=False)
    ws = WorkloadState(pol.workload, 1, 1, observed_demand=1.0, observed_at=NOW - 5)
    fc = flat_forecast(pol.workload, NOW, 30.0, step_s=60.0)
    (a,) = plan({pol.workload: fc}, ClusterState({pol.workload: ws}), [pol], NOW).actions
    assert isinstance(a, ScaleTo) and a.to_replicas > 1


def test_an_observation_exactly_stale_after_seconds_old_is_still_fresh_enough_to_scale_in() -> None:
    pol = service_policy(fallback={"mode": "reactive", "staleAfterSeconds": 60}, maxStepDown=20)
    ws = WorkloadState(pol.workload, 10, 10, observed_demand=20.0, observed_at=NOW - 60)
    for decision in (
        decide_replicas(pol.workload, pol.spec, ws, None, NOW).action,
        plan({}, ClusterState({pol.workload: ws}), [pol], NOW).actions[0],
    ):
        assert isinstance(decision, ScaleTo) and decision.to_replicas == 2, decision.reason.message
    late = WorkloadState(pol.workload, 10, 10, observed_demand=20.0, observed_at=NOW - 61)
    assert decide_replicas(pol.workload, pol.spec, late, None, NOW).action.to_replicas == 10
