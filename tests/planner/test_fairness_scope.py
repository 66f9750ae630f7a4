"""A capacity that is a part of the whole (``run --shard``) is named as such in the reasons."""

from __future__ import annotations

from planner_helpers import flat_forecast, service_policy

from planner import plan
from scaleahead.types import ClusterState, ScaleTo, WorkloadState

NOW = 1_000_000.0


def _plan(scope: str | None) -> tuple[ScaleTo, tuple[str, ...]]:
    pol = service_policy("web", maxReplicas=50, tenant="shop")
    ws = WorkloadState(pol.workload, 2, 2, 100.0, NOW - 5)
    kw = {} if scope is None else {"capacity_scope": scope}
    out = plan(
        {pol.workload: flat_forecast(pol.workload, NOW - 5, 100.0)},
        ClusterState({pol.workload: ws}),
        [pol],
        NOW,
        capacity={"*": 3, "shop": 4},
        **kw,
    )
    action = out.actions[0]
    assert isinstance(action, ScaleTo) and action.to_replicas == 3
    return action, out.notes


def test_a_shards_part_of_the_capacity_is_named_as_a_part_in_reasons_and_notes() -> None:
    # Under run --shard 1/2 the loop plans with its part of loop.capacity; until 2026-12-07 the
    # reasons called that part "cluster capacity 3" (loop reasons audit).
    action, notes = _plan("shard 1/2's part of the ")
    assert "shard 1/2's part of the cluster capacity 3 is short of the" in action.reason.message
    assert any(n.startswith("shard 1/2's part of the cluster capacity 3 is short") for n in notes), notes
    whole, notes = _plan(None)
    assert "cluster capacity 3 is short" in whole.reason.message
    assert "shard" not in whole.reason.message and not any("shard" in n for n in notes)


def test_a_shards_part_of_a_tenant_quota_is_named_as_a_part() -> None:
    pol = service_policy("web", maxReplicas=50, tenant="shop")
    ws = WorkloadState(pol.workload, 2, 2, 100.0, NOW - 5)
    out = plan(
        {pol.workload: flat_forecast(pol.workload, NOW - 5, 100.0)},
        ClusterState({pol.workload: ws}),
        [pol],
        NOW,
        capacity={"shop": 4},
        capacity_scope="shard 0/3's part of the ",
    )
    assert "shard 0/3's part of the tenant shop quota 4 is short" in out.actions[0].reason.message
