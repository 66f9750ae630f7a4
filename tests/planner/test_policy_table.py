"""The policy table (planner/table.py) is read once per set of policy objects and never goes stale.

``plan`` keeps what it reads from policies (workload refs, services vs. warm-pool functions, the
rule's spec fields) while it is called with the very same policy objects; an edited or reloaded
policy is a new object and must be planned by its new fields.
"""

from __future__ import annotations

import numpy as np
from planner_helpers import flat_forecast, function_policy, invocation_forecast, service_policy

from planner import plan
from planner.replicas import decide_replicas
from planner.table import policy_table
from scaleahead.types import ClusterState, Forecast, LazyReason, MovePod, ScaleTo, SetWarmPool, WorkloadState

NOW = 1_000_000.0


def test_the_same_policy_objects_give_the_same_table_and_any_other_object_a_new_one() -> None:
    policies = [service_policy(f"w{i}") for i in range(5)]
    table = policy_table(policies)
    assert policy_table(policies) is table
    assert policy_table(tuple(policies)) is table  # same objects, another container
    edited = policies[2].model_copy(update={"spec": policies[2].spec.model_copy(update={"max_replicas": 7})})
    changed = [*policies[:2], edited, *policies[3:]]
    other = policy_table(changed)
    assert other is not table
    assert other.services.max_replicas.tolist() == [100, 100, 7, 100, 100]
    assert policy_table(changed[:4]) is not other  # a shorter list is another set
    # an equal but distinct object (a reload of the same file) is another set too
    reloaded = [p.model_copy() for p in policies]
    assert policy_table(reloaded) is not table


def test_a_policy_edited_between_plans_is_planned_by_its_new_bounds() -> None:
    policies = [service_policy(f"w{i}", maxReplicas=50) for i in range(3)]
    state = ClusterState({p.workload: WorkloadState(p.workload, 5, 5, 300.0, NOW - 5) for p in policies})
    forecasts = {p.workload: flat_forecast(p.workload, NOW, 400.0) for p in policies}
    first = plan(forecasts, state, policies, NOW)
    assert [a.to_replicas for a in first.actions if isinstance(a, ScaleTo)] == [40, 40, 40]
    again = plan(forecasts, state, policies, NOW)  # the kept table
    assert [repr(a) for a in again.actions] == [repr(a) for a in first.actions]
    spec = policies[1].spec.model_copy(update={"max_replicas": 12, "forecast_quantile": 0.5})
    edited = [policies[0], policies[1].model_copy(update={"spec": spec}), policies[2]]
    second = plan(forecasts, state, edited, NOW)
    want = [
        decide_replicas(p.workload, p.spec, state.workloads[p.workload], forecasts[p.workload], NOW) for p in edited
    ]
    assert [repr(a) for a in second.actions] == [repr(d.action) for d in want]
    assert [a.to_replicas for a in second.actions if isinstance(a, ScaleTo)] == [40, 12, 40]


def test_functions_and_services_keep_policy_order_and_missing_states_start_at_min_replicas() -> None:
    svc = [service_policy(f"s{i}", minReplicas=2) for i in range(3)]
    fns = [function_policy(f"f{i}", minProbability=0.1) for i in range(2)]
    policies = [fns[0], svc[0], svc[1], fns[1], svc[2]]
    forecasts = {p.workload: flat_forecast(p.workload, NOW, 30.0) for p in svc}
    invocations = {p.workload: invocation_forecast(p.workload, NOW, [0.5] * 5) for p in fns}
    state = ClusterState({svc[1].workload: WorkloadState(svc[1].workload, 6, 6, 35.0, NOW - 5)})
    for _ in range(2):  # a new table, then the kept one
        result = plan(forecasts, state, policies, NOW, invocations=invocations)
        kinds = [type(a) for a in result.actions]
        assert kinds == [SetWarmPool, ScaleTo, ScaleTo, SetWarmPool, ScaleTo]
        assert [a.workload for a in result.actions if not isinstance(a, MovePod)] == [p.workload for p in policies]
        for p, action in zip(policies, result.actions, strict=True):
            if p in svc:
                ws = state.workloads.get(p.workload) or WorkloadState(p.workload, 2, 2)
                want = decide_replicas(p.workload, p.spec, ws, forecasts[p.workload], NOW).action
                assert repr(action) == repr(want)
        # no observed demand for the services without a state: their reactive fallback has nothing
        # to react to and keeps the current count, and the plan names that rule
        assert dict(result.fallbacks) == {svc[0].workload: "current", svc[2].workload: "current"}


def test_a_batch_without_any_forecast_falls_back_for_every_service() -> None:
    policies = [service_policy(f"w{i}", fallback={"mode": "static", "staticReplicas": 4}) for i in range(4)]
    state = ClusterState({p.workload: WorkloadState(p.workload, 2, 2, 15.0, NOW - 5) for p in policies})
    result = plan({}, state, policies, NOW)
    assert [a.to_replicas for a in result.actions if isinstance(a, ScaleTo)] == [4, 4, 4, 4]
    assert set(result.fallbacks.values()) == {"static"}
    assert all("no forecast: fallback static 4 replicas" in a.reason.message for a in result.actions)


def test_forecasts_of_different_horizons_go_to_the_reference_and_decide_the_same() -> None:
    policies = [service_policy(f"w{i}") for i in range(4)]
    state = ClusterState({p.workload: WorkloadState(p.workload, 3, 3, 25.0, NOW - 5) for p in policies})
    forecasts = {
        p.workload: flat_forecast(p.workload, NOW, 50.0, steps=90 if i % 2 else 30) for i, p in enumerate(policies)
    }
    forecasts[policies[3].workload] = flat_forecast(policies[3].workload, NOW, np.nan)
    result = plan(forecasts, state, policies, NOW)
    for p, action in zip(policies, result.actions, strict=True):
        want = decide_replicas(p.workload, p.spec, state.workloads[p.workload], forecasts[p.workload], NOW).action
        assert repr(action) == repr(want)


def test_services_at_the_objective_level_decide_as_the_reference_in_one_batch_and_mixed_with_fixed_ones() -> None:
    rng = np.random.default_rng(3)
    objective = [service_policy(f"o{i}", forecastQuantile=None, maxReplicas=500) for i in range(40)]
    fixed = [service_policy(f"f{i}", forecastQuantile=0.8, maxReplicas=500) for i in range(10)]
    for policies in (objective, objective[:20] + fixed + objective[20:]):
        state = ClusterState(
            {p.workload: WorkloadState(p.workload, int(rng.integers(0, 30)), 3, 80.0, NOW - 5) for p in policies}
        )
        forecasts = {}
        for p in policies:
            base = rng.gamma(2.0, 50.0, 90)
            forecasts[p.workload] = Forecast(
                p.workload, NOW, 10.0, {0.1: base * 0.6, 0.5: base, 0.9: base * 1.5, 0.99: base * 2.2}
            )
        result = plan(forecasts, state, policies, NOW)
        assert all(isinstance(a.reason, LazyReason) for a in result.actions)  # the batch decided them all
        for p, action in zip(policies, result.actions, strict=True):
            want = decide_replicas(p.workload, p.spec, state.workloads[p.workload], forecasts[p.workload], NOW)
            assert repr(action) == repr(want.action)
