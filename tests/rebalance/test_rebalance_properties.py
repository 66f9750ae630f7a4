"""Properties of plan_moves on random small clusters (hypothesis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import cluster, node, pod

from planner.placement_rules import fits_node
from planner.rebalance import RebalanceWeights, conflicts, interference_pairs, plan_moves, pod_key, pod_peak_cpu_m
from scaleahead.types import (
    ClusterState,
    MovePod,
    NodeSelectorRequirement,
    Pod,
    PodDisruptionBudget,
    Taint,
    Toleration,
)

CLASSES = ("cpu-bound", "io-bound", "latency-critical", "none")
OWNERS = ("web", "etl", "kafka", "cart")


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    n_nodes = draw(st.integers(2, 5))
    nodes = [node(f"n{i}", cpu_m=draw(st.sampled_from([4000, 8000, 16000]))) for i in range(n_nodes)]
    pods: list[Pod] = []
    for i in range(draw(st.integers(0, 14))):
        on = draw(st.sampled_from(nodes))
        owner = draw(st.sampled_from(OWNERS))
        cpu = draw(st.integers(100, 3000))
        anti = (owner,) if owner in ("kafka", "cart") else ()
        candidate = pod(
            f"{owner}-{i}",
            on.name,
            cpu,
            peak=cpu * draw(st.sampled_from([0.5, 1.0, 1.5, 2.0])),
            cls=draw(st.sampled_from(CLASSES)),
            owner=owner,
            anti=anti,
        )
        if any(conflicts(candidate, q) for q in pods if q.node == on.name):
            continue
        pods.append(candidate)
    pdbs = [PodDisruptionBudget("app", f"{o}-pdb", o, draw(st.integers(0, 2))) for o in ("kafka", "cart")]
    return cluster(nodes, pods, pdbs)


def applied(state: ClusterState, moves: tuple[MovePod, ...]) -> list[Pod]:
    where = {f"{m.namespace}/{m.pod}": m.to_node for m in moves}
    return [
        Pod(
            p.namespace,
            p.name,
            where.get(pod_key(p), p.node),
            p.cpu_request_m,
            p.memory_request_mb,
            p.owner,
            p.usage_cpu_m,
            p.peak_cpu_m,
            p.interference,
            p.labels,
            p.anti_affinity,
        )
        for p in state.pods
    ]


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(0, 6), st.sampled_from([0.8, 0.9, 1.0]))
def test_moves_never_overfill_a_receiving_node_at_the_forecast_peak(
    state: ClusterState, max_moves: int, fraction: float
) -> None:
    moves = plan_moves(state, max_moves, max_peak_fraction=fraction)
    after = applied(state, moves)
    for n in state.nodes:
        if not any(m.to_node == n.name for m in moves):
            continue
        here = [p for p in after if p.node == n.name]
        assert sum(pod_peak_cpu_m(p) for p in here) <= fraction * n.cpu_m + 1e-6
        assert sum(p.cpu_request_m for p in here) <= n.cpu_m
        assert sum(p.memory_request_mb for p in here) <= n.memory_mb


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(0, 6))
def test_moves_respect_pdbs_anti_affinity_and_the_budget(state: ClusterState, max_moves: int) -> None:
    moves = plan_moves(state, max_moves)
    assert len(moves) <= max_moves
    assert len({(m.namespace, m.pod) for m in moves}) == len(moves)  # a pod moves at most once
    by_key = {pod_key(p): p for p in state.pods}
    per_owner = Counter(by_key[f"{m.namespace}/{m.pod}"].owner for m in moves)
    for pdb in state.pdbs:
        assert per_owner[pdb.owner] <= pdb.disruptions_allowed
    after = applied(state, moves)
    for m in moves:
        assert m.from_node != m.to_node
        assert by_key[f"{m.namespace}/{m.pod}"].owner != ""
        here = [p for p in after if p.node == m.to_node]
        assert not any(conflicts(a, b) for a in here for b in here)
        assert m.reason.message.startswith(f"move {m.namespace}/{m.pod} {m.from_node} -> {m.to_node}: ")
        assert m.expected_gain > 0


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(0, 6))
def test_moves_are_deterministic_and_independent_of_input_order(state: ClusterState, max_moves: int) -> None:
    first = plan_moves(state, max_moves)
    shuffled = ClusterState(nodes=state.nodes[::-1], pods=state.pods[::-1], pdbs=state.pdbs[::-1])
    assert plan_moves(state, max_moves) == first
    assert plan_moves(shuffled, max_moves) == first


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(1, 6))
def test_moves_never_add_interfering_pairs(state: ClusterState, max_moves: int) -> None:
    moves = plan_moves(state, max_moves)
    assert interference_pairs(applied(state, moves)) <= interference_pairs(state.pods)


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(1, 6), st.sampled_from([0.8, 0.9, 1.0]))
def test_moves_applied_one_by_one_always_fit_the_scheduler_and_the_observed_usage(
    state: ClusterState, max_moves: int, fraction: float
) -> None:
    # exchanges are checked at the forecast peak only at their end; every step on the way must still
    # be one the scheduler accepts (requests, anti-affinity) within the cap at the observed usage
    where = {pod_key(p): p.node for p in state.pods}
    by_key = {pod_key(p): p for p in state.pods}
    caps = {n.name: n for n in state.nodes}
    for m in plan_moves(state, max_moves, max_peak_fraction=fraction):
        key = f"{m.namespace}/{m.pod}"
        assert where[key] == m.from_node
        where[key] = m.to_node
        here = [by_key[k] for k, n in where.items() if n == m.to_node]
        n = caps[m.to_node]
        assert sum(p.cpu_request_m for p in here) <= n.cpu_m
        assert sum(p.memory_request_mb for p in here) <= n.memory_mb
        assert sum(p.usage_cpu_m for p in here) <= fraction * n.cpu_m + 1e-6
        assert not any(conflicts(a, b) for a in here for b in here)
        assert "expected gain" in m.reason.message


ZONES = ("z1", "z2", "z3")
TAINTS = (
    Taint("dedicated", "db", "NoSchedule"),
    Taint("maintenance", "", "NoExecute"),
    Taint("spot", "", "PreferNoSchedule"),
)
RULES = {
    "none": {},
    "selector": {"node_selector": {"zone": "z1"}},
    "affinity": {
        "required_node_terms": (
            (NodeSelectorRequirement("zone", "In", ("z2",)),),
            (NodeSelectorRequirement("metadata.name", "In", ("n0",), field=True),),
        )
    },
    "not-in": {"required_node_terms": ((NodeSelectorRequirement("zone", "NotIn", ("z1", "z3")),),)},
    "tolerates-db": {"tolerations": (Toleration("dedicated", "Equal", "db", "NoSchedule"),)},
    "tolerates-all": {"tolerations": (Toleration("", "Exists"),)},
}


@st.composite
def clusters_with_node_rules(draw: st.DrawFn) -> ClusterState:
    """``clusters()`` whose nodes have zones and taints and whose pods have node rules."""
    state = draw(clusters())
    nodes = tuple(
        replace(
            n,
            labels={"zone": draw(st.sampled_from(ZONES))},
            taints=tuple(draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True))),
        )
        for n in state.nodes
    )
    pods = tuple(replace(p, **RULES[draw(st.sampled_from(sorted(RULES)))]) for p in state.pods)
    return ClusterState(nodes=nodes, pods=pods, pdbs=state.pdbs)


@settings(max_examples=300, deadline=None)
@given(clusters_with_node_rules(), st.integers(1, 6), st.booleans())
def test_a_move_never_targets_a_node_the_pods_node_rules_refuse(
    state: ClusterState, max_moves: int, separation_only: bool
) -> None:
    weights = RebalanceWeights(node_freed=0.0) if separation_only else None  # swaps and exchanges too
    by_key = {pod_key(p): p for p in state.pods}
    nodes = {n.name: n for n in state.nodes}
    moves = plan_moves(state, max_moves, weights=weights)
    for m in moves:
        assert fits_node(by_key[f"{m.namespace}/{m.pod}"], nodes[m.to_node]), m.reason.message
    after = applied(state, moves)
    assert interference_pairs(after) <= interference_pairs(state.pods)
