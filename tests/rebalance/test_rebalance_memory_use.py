"""A pod's memory on a node is the larger of its request and its observed use
(``planner.rebalance.pod_memory_mb``): no move takes a node's pods past its allocatable memory by
use, which the scheduler's rule (requests) alone allows and the kubelet answers with evictions."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import cluster, node, pod
from test_rebalance_properties import clusters

from planner.rebalance import plan_moves, pod_key, pod_memory_mb
from scaleahead.types import ClusterState


def test_a_pod_is_placed_by_the_larger_of_its_memory_request_and_use() -> None:
    # web-1 requests 1000 MiB; b has 4000 MiB free by requests
    base = [pod("web-1", "a", 1000), pod("db-1", "b", 6000, owner="")]
    assert len(plan_moves(cluster([node("a"), node("b")], base), max_moves=4)) == 1
    heavy = [replace(base[0], usage_memory_mb=4500.0), base[1]]
    assert plan_moves(cluster([node("a"), node("b")], heavy), max_moves=4) == ()
    # a neighbour above its request counts as much: db-1 uses 9500 of b's 10000
    full = [base[0], replace(base[1], usage_memory_mb=9500.0)]
    assert plan_moves(cluster([node("a"), node("b")], full), max_moves=4) == ()
    # use below the request, or unknown (NaN), changes nothing
    light = [replace(base[0], usage_memory_mb=10.0), replace(base[1], usage_memory_mb=float("nan"))]
    assert len(plan_moves(cluster([node("a"), node("b")], light), max_moves=4)) == 1
    assert pod_memory_mb(light[1]) == 6000.0


def test_a_swap_is_not_made_when_memory_use_would_pass_a_node_in_between() -> None:
    """Two mixed nodes that a swap makes pure (test_rebalance_moves); web uses 6500 MiB of its 5000
    request. The end state holds what each node holds now (9500 MiB by use), but while the two pods
    restart one node holds both, 11000 MiB by use (9500 by requests) of its 10000."""
    from planner.rebalance import RebalanceWeights

    def two(use: float) -> list:  # type: ignore[type-arg]
        out = []
        for n, i in (("a", 1), ("b", 2)):
            out += [
                pod(f"cart-{i}", n, 1000, cls="latency-critical", mem=1500),
                pod(f"etl-{i}", n, 2000, cls="cpu-bound", mem=1500),
                replace(pod(f"web-{i}", n, 1000, mem=5000), usage_memory_mb=use),
            ]
        return out

    no_drain = RebalanceWeights(node_freed=0.0)
    swapped = plan_moves(cluster([node("a"), node("b")], two(5000.0)), max_moves=2, weights=no_drain)
    assert [m.reason.code for m in swapped] == ["rebalance.swap", "rebalance.swap"]
    assert plan_moves(cluster([node("a"), node("b")], two(6500.0)), max_moves=2, weights=no_drain) == ()


@st.composite
def clusters_with_memory_use(draw: st.DrawFn) -> ClusterState:
    """``clusters()`` whose pods use from a tenth to three times their memory request."""
    state = draw(clusters())
    pods = tuple(
        replace(p, usage_memory_mb=p.memory_request_mb * draw(st.sampled_from([0.1, 1.0, 1.5, 3.0])))
        for p in state.pods
    )
    return replace(state, pods=pods)


@settings(max_examples=200, deadline=None)
@given(clusters_with_memory_use(), st.integers(1, 6))
def test_moves_applied_one_by_one_never_take_a_node_past_its_memory_by_use(state: ClusterState, moves: int) -> None:
    where = {pod_key(p): p.node for p in state.pods}
    by_key = {pod_key(p): p for p in state.pods}
    nodes = {n.name: n for n in state.nodes}
    for m in plan_moves(state, moves):
        key = f"{m.namespace}/{m.pod}"
        where[key] = m.to_node
        here = [by_key[k] for k, n in where.items() if n == m.to_node]
        assert sum(pod_memory_mb(p) for p in here) <= nodes[m.to_node].memory_mb
