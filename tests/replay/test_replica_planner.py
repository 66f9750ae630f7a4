"""The tuned replica rule: keep replicas until a replacement could be ready, react when the forecast missed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import plan
from scaleahead.policy import Policy
from scaleahead.types import ClusterState, Forecast, ScaleTo, WorkloadRef, WorkloadState

REF = WorkloadRef("Deployment", "shop", "web")
NOW = 10_000.0


def policy(**spec: object) -> Policy:
    base = {
        "target": {"name": "web", "namespace": "shop"},
        "demand": {"query": "q", "unit": "req/s"},
        "capacityPerReplica": 10.0,
        "targetUtilization": 1.0,
        "startupSeconds": 60.0,
        "scaleDownStabilizationSeconds": 0,
        "maxReplicas": 1000,
        "forecastQuantile": 0.9,  # the rule's mechanics at a fixed level; the objective: tests/planner
    }
    return Policy.model_validate({"metadata": {"name": "web"}, "spec": {**base, **spec}})


def forecast(p90: list[float], p99: list[float] | None = None) -> Forecast:
    a = np.array(p90, dtype=float)
    b = np.array(p99 if p99 is not None else p90, dtype=float)
    return Forecast(REF, NOW, 10.0, {0.5: a * 0.9, 0.9: a, 0.99: np.maximum(a, b)}, "test")


def decide(fc: Forecast, replicas: int, ready: int, observed: float, pol: Policy | None = None) -> ScaleTo:
    ws = WorkloadState(REF, replicas, ready, observed, NOW)
    out = plan({REF: fc}, ClusterState(workloads={REF: ws}), [pol or policy()], NOW, interval_s=10.0)
    action = out.actions[0]
    assert isinstance(action, ScaleTo)
    assert action.reason.message.strip()
    return action


def test_scale_up_follows_the_forecast_peak_when_a_new_replica_would_be_ready() -> None:
    # steps 0..5 (before now + 60 s) are low; steps 6 and 7 (60-80 s ahead) need 9 replicas
    a = decide(forecast([20] * 6 + [85, 85] + [20] * 82), replicas=3, ready=3, observed=20.0)
    assert a.to_replicas == 9
    assert a.reason.code == "forecast"


def test_scale_down_keeps_replicas_the_forecast_needs_before_a_replacement_could_be_ready() -> None:
    # 50 req/s at 30 s ahead (5 replicas) though only 20 from 60 s on: a replica removed now
    # could not be back in time, so hold 5.
    a = decide(forecast([20, 20, 20, 50] + [20] * 86), replicas=5, ready=5, observed=20.0)
    assert a.to_replicas == 5
    assert a.reason.code == "keep_until_replacement"
    b = decide(forecast([20] * 90), replicas=5, ready=5, observed=20.0)
    assert b.to_replicas == 2
    assert b.reason.code == "forecast_down"


def test_a_hold_says_whether_its_peak_comes_before_a_replacement_or_within_the_stabilization() -> None:
    # 10,000 s is 02:46:40 UTC. The peak 30 s ahead comes before a replica removed now could be
    # back (start-up 60 s); one 200 s ahead only within the 300 s stabilization window.
    soon = decide(forecast([20, 20, 20, 50] + [20] * 86), replicas=5, ready=5, observed=20.0)
    assert soon.reason.code == "keep_until_replacement"
    assert (
        "p90 forecast peak 50 req/s at 02:47:10 needs 5, before a replica removed now could be back (start-up "
        "60 s, then one 10 s interval)"
    ) in soon.reason.message
    stab = policy(scaleDownStabilizationSeconds=300)
    later = decide(forecast([20] * 20 + [50] + [20] * 69), replicas=5, ready=5, observed=20.0, pol=stab)
    assert later.reason.code == "keep_until_replacement"
    assert (
        "p90 forecast peak 50 req/s at 02:50:00 needs 5, within the 300 s scale-down stabilization window "
        "(until 02:51:40)"
    ) in later.reason.message


def test_a_noisy_step_above_the_planning_quantile_alone_does_not_scale_up() -> None:
    # observed 45 needs 5 replicas, above the p90 (3), below the p99 (60) and served by 5 ready
    a = decide(forecast([30] * 90, [60] * 90), replicas=5, ready=5, observed=45.0)
    assert a.to_replicas == 5
    assert a.reason.code != "reactive_floor"


def test_demand_above_even_the_top_quantile_scales_up_to_what_it_needs_now() -> None:
    a = decide(forecast([30] * 90, [40] * 90), replicas=3, ready=3, observed=95.0)
    assert a.to_replicas == 10
    assert a.reason.code == "reactive_floor"
    assert "forecast missed" in a.reason.message


def test_demand_above_the_ready_capacity_scales_up_even_inside_the_forecast_band() -> None:
    a = decide(forecast([30] * 90, [200] * 90), replicas=3, ready=3, observed=55.0)
    assert a.to_replicas == 6
    assert "ready replicas" in a.reason.message


def test_stabilization_does_not_hold_more_than_the_top_quantile_needs_in_its_window() -> None:
    pol = policy(scaleDownStabilizationSeconds=300)
    fc = forecast([20] * 90, [40] * 90)  # p90 needs 2, p99 needs 4 over the whole window
    ws = WorkloadState(REF, 9, 9, 20.0, NOW, recent_desired=((NOW - 100.0, 9),))
    out = plan({REF: fc}, ClusterState(workloads={REF: ws}), [pol], NOW, interval_s=10.0)
    action = out.actions[0]
    assert isinstance(action, ScaleTo)
    assert action.to_replicas == 4
    assert "stabilization" in action.reason.message and "p99 forecast peak" in action.reason.message
    # without a usable forecast the window holds what it held
    out = plan({}, ClusterState(workloads={REF: ws}), [pol], NOW, interval_s=10.0)
    action = out.actions[0]
    assert isinstance(action, ScaleTo)
    assert action.to_replicas == 9


def test_scale_down_never_goes_below_what_observed_demand_needs() -> None:
    a = decide(forecast([10] * 90), replicas=8, ready=8, observed=61.0)
    assert a.to_replicas == 7


def test_stabilization_keeps_replicas_the_forecast_needs_within_its_window() -> None:
    values = [20] * 20 + [70] + [20] * 69  # 70 at 200 s ahead
    pol = policy(scaleDownStabilizationSeconds=300)
    assert decide(forecast(values), replicas=7, ready=7, observed=20.0, pol=pol).to_replicas == 7
    assert decide(forecast(values), replicas=7, ready=7, observed=20.0).to_replicas == 2


@settings(max_examples=60, deadline=None)
@given(
    level=st.floats(0, 500),
    bump=st.floats(0, 200),
    replicas=st.integers(0, 80),
    observed=st.floats(0, 800),
)
def test_decisions_stay_within_bounds_and_grow_with_the_forecast(
    level: float, bump: float, replicas: int, observed: float
) -> None:
    pol = policy(minReplicas=2, maxReplicas=60)
    low = decide(forecast([level] * 90), replicas, replicas, observed, pol).to_replicas
    high = decide(forecast([level + bump] * 90), replicas, replicas, observed, pol).to_replicas
    assert 2 <= low <= 60 and 2 <= high <= 60
    assert high >= low
