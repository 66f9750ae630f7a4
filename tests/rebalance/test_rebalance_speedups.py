"""The planner's shortcuts decide exactly as the plain computations they replace (hypothesis).

``_best_exchange`` ranks the groups of sets (by size and classes) before it checks capacity, and
``_Topology`` finds the pods a term selects (the terms that select a pod) from an index by label;
each is compared here with the computation it replaced, written out in full: every pair of sets
checked and ranked at once, every pod (term) of the domain scanned.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import cluster, node, pod
from test_rebalance_properties import clusters_with_ephemeral_storage, clusters_with_pod_rules

import planner.rebalance as planner_rebalance
from planner.rebalance import (
    CPU_BOUND,
    LATENCY_CRITICAL,
    MAX_EXCHANGE_TRIALS,
    RebalanceWeights,
    _best_exchange,
    _choose,
    _Cluster,
    _end_state_compatible,
    _exchange_order,
    _safe,
    _sets_allowed,
    _Side,
    _Step,
    _Topology,
    pod_key,
    pod_peak_cpu_m,
)
from scaleahead.types import ClusterState, Pod, PodAffinityTerm, PodDisruptionBudget


def best_exchange_in_full(
    c: _Cluster, a: str, sa: _Side, b: str, sb: _Side, mpf: float, w: RebalanceWeights, budget: int
) -> _Step | None:
    """Every pair of sets checked at once, ranked by one lexsort (the planner before the groups)."""
    na, nb = c.nodes[a], c.nodes[b]
    x = np.s_[:, None]
    y = np.s_[None, :]
    moves = sa.size[x] + sb.size[y]
    ok = (moves >= 1) & (moves <= budget)
    ok &= c.peak[a] - sa.peak[x] + sb.peak[y] <= mpf * na.cpu_m + 1e-9
    ok &= c.peak[b] - sb.peak[y] + sa.peak[x] <= mpf * nb.cpu_m + 1e-9
    ok &= c.req_cpu[a] - sa.req_cpu[x] + sb.req_cpu[y] <= na.cpu_m
    ok &= c.req_cpu[b] - sb.req_cpu[y] + sa.req_cpu[x] <= nb.cpu_m
    ok &= c.req_mem[a] - sa.req_mem[x] + sb.req_mem[y] <= na.memory_mb
    ok &= c.req_mem[b] - sb.req_mem[y] + sa.req_mem[x] <= nb.memory_mb
    ok &= (sb.req_eph[y] <= 0) | (c.req_eph[a] - sa.req_eph[x] + sb.req_eph[y] <= na.ephemeral_storage_mb)
    ok &= (sa.req_eph[x] <= 0) | (c.req_eph[b] - sb.req_eph[y] + sa.req_eph[x] <= nb.ephemeral_storage_mb)
    ok &= len(c.pods[a]) - sa.size[x] + sb.size[y] > 0
    ok &= len(c.pods[b]) - sb.size[y] + sa.size[x] > 0
    ok &= c.pods_on(a) - sa.size[x] + sb.size[y] <= na.max_pods
    ok &= c.pods_on(b) - sb.size[y] + sa.size[x] <= nb.max_pods
    a_to_b, b_to_a = _sets_allowed(c, sa, b), _sets_allowed(c, sb, a)
    if a_to_b is not None:
        ok &= a_to_b[x]
    if b_to_a is not None:
        ok &= b_to_a[y]
    ca, la = c.count(a, CPU_BOUND), c.count(a, LATENCY_CRITICAL)
    cb, lb = c.count(b, CPU_BOUND), c.count(b, LATENCY_CRITICAL)
    ca2 = ca - sa.n_cpu[x] + sb.n_cpu[y]
    la2 = la - sa.n_lat[x] + sb.n_lat[y]
    cb2 = cb - sb.n_cpu[y] + sa.n_cpu[x]
    lb2 = lb - sb.n_lat[y] + sa.n_lat[x]
    net = ca * la + cb * lb - ca2 * la2 - cb2 * lb2
    ok &= (net > 0) & (w.pair_separated * net / np.maximum(moves, 1) > w.move_cost)
    rows, cols = np.nonzero(ok)
    if rows.size == 0:
        return None
    per_move = net[rows, cols] / moves[rows, cols]
    moved_peak = sa.peak[rows] + sb.peak[cols]
    ranked = np.lexsort((moved_peak, moves[rows, cols], -net[rows, cols], -per_move))
    for j in ranked[:MAX_EXCHANGE_TRIALS]:
        xs, ys = sa.sets[int(rows[j])], sb.sets[int(cols[j])]
        order = _exchange_order(c, xs, a, ys, b, mpf)
        if order is None or not _end_state_compatible(c, xs, a, ys, b):
            continue
        kind = "separate" if not xs or not ys else ("swap" if len(xs) == len(ys) == 1 else "exchange")
        pairs = int(net[rows[j], cols[j]])
        return _Step(kind, a if xs else b, order, w.pair_separated * pairs, pairs)
    return None


@st.composite
def crowded_pairs(draw: st.DrawFn) -> ClusterState:
    """Two or three nodes full of pods of two sizes and the two interfering classes: many sets of
    pods tie on every rank, more than ``MAX_EXCHANGE_TRIALS`` fit, and many cannot be ordered
    (a ``kafka`` pod excludes another, a PDB allows one ``kafka`` move, usage above the cap)."""
    nodes = [node(f"n{i}", cpu_m=draw(st.sampled_from([6000, 8000, 12000]))) for i in range(draw(st.integers(2, 3)))]
    pods: list[Pod] = []
    for n in nodes:
        for j in range(draw(st.integers(3, 9))):
            owner = draw(st.sampled_from(["web", "web", "kafka"]))
            cpu = draw(st.sampled_from([500, 1000]))
            pods.append(
                pod(
                    f"{owner}-{n.name}-{j}",
                    n.name,
                    cpu,
                    cls=draw(st.sampled_from(["cpu-bound", "latency-critical", "latency-critical", "none"])),
                    owner=owner,
                    anti=("kafka",) if owner == "kafka" else (),
                    usage=cpu * draw(st.sampled_from([1, 1, 3])),
                )
            )
    return cluster(nodes, pods, [PodDisruptionBudget("app", "kafka-pdb", "kafka", draw(st.integers(1, 2)))])


def _moved_a_little(c: _Cluster, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(0, 2))):
        movers = sorted((p for ps in c.pods.values() for p in ps if c.movable(p)), key=pod_key)
        targets = sorted(c.nodes)
        if not movers or len(targets) < 2:
            return
        p = data.draw(st.sampled_from(movers))
        c.move(p, data.draw(st.sampled_from([n for n in targets if n != p.node])))


def _every_exchange_as_in_full(c: _Cluster, budgets: tuple[int, ...]) -> None:
    names = sorted(n for n in c.nodes if c.nodes[n].schedulable)
    sides = {n: _Side.of(c, n) for n in names}
    default = planner_rebalance._CHECK_AT_ONCE_CELLS
    try:
        # both ways of checking capacity: every pair of sets at once (small nodes), group by group (large)
        for at_once in (default, 0):
            planner_rebalance._CHECK_AT_ONCE_CELLS = at_once
            for w in (RebalanceWeights(), RebalanceWeights(pair_separated=0.25, move_cost=0.0)):
                for mpf in (0.8, 0.9, 1.0):
                    for budget in budgets:
                        for a in names:
                            for b in names:
                                if a != b:
                                    expected = best_exchange_in_full(c, a, sides[a], b, sides[b], mpf, w, budget)
                                    got = _best_exchange(c, a, sides[a], b, sides[b], mpf, w, budget)
                                    assert got == expected, (a, b, mpf, budget, w, at_once)
    finally:
        planner_rebalance._CHECK_AT_ONCE_CELLS = default


@settings(max_examples=100, deadline=None)
@given(st.one_of(clusters_with_pod_rules(), clusters_with_ephemeral_storage()), st.data())
def test_the_best_exchange_is_the_one_every_pair_of_sets_ranked_at_once_gives(
    state: ClusterState, data: st.DataObject
) -> None:
    c = _Cluster.of(state)
    _moved_a_little(c, data)
    _every_exchange_as_in_full(c, (1, 2, 4, 6))


@settings(max_examples=150, deadline=None)
@given(crowded_pairs(), st.data())
def test_the_best_exchange_breaks_ties_and_counts_trials_as_the_ranking_of_every_pair_of_sets_does(
    state: ClusterState, data: st.DataObject
) -> None:
    # many sets tie on pairs per move, pairs, moves and peak moved, more than MAX_EXCHANGE_TRIALS fit and
    # many cannot be ordered: the groups must be ranked, and tried, exactly as one lexsort of every pair
    c = _Cluster.of(state)
    _moved_a_little(c, data)
    _every_exchange_as_in_full(c, (2, 3, 4, 6))


def selected_by_in_full(c: _Cluster, term: PodAffinityTerm, namespace: str, key: str, value: str) -> list[Pod]:
    topology = c.topology
    assert topology is not None
    return [q for m in topology.nodes_in[key, value] for q in (*c.pods[m], *c.bound[m]) if term.selects(q, namespace)]


def selecting_in_full(c: _Cluster, pod: Pod, key: str, value: str) -> list[Pod]:
    topology = c.topology
    assert topology is not None
    return [q for q, term in topology.held.get((key, value), ()) if term.selects(pod, q.namespace)]


@settings(max_examples=200, deadline=None)
@given(clusters_with_pod_rules(), st.data())
def test_the_domain_index_finds_the_pods_and_terms_a_scan_of_the_domain_finds_in_its_order(
    state: ClusterState, data: st.DataObject
) -> None:
    c = _Cluster.of(state)
    for _ in range(3):
        topology = c.topology
        if topology is None:
            return
        assert isinstance(topology, _Topology)
        everyone = sorted((p for n in c.nodes for p in (*c.pods[n], *c.bound[n])), key=pod_key)
        for key, value in sorted(topology.nodes_in):
            for p in everyone:
                found = topology.selecting(p, key, value)
                assert [q for _, q in found] == selecting_in_full(c, p, key, value)
                assert all(k == pod_key(q) for k, q in found)
                for term in p.anti_affinity_terms:
                    found = topology.selected_by(c, term, p.namespace, key, value)
                    assert [q for _, q in found] == selected_by_in_full(c, term, p.namespace, key, value)
        movers = sorted((p for p in everyone if not p.node_bound), key=pod_key)
        if not movers or len(c.nodes) < 2:
            return
        p = data.draw(st.sampled_from(movers))
        c.move(p, data.draw(st.sampled_from(sorted(n for n in c.nodes if n != p.node))))


def choose_by_sorting_every_node(c: _Cluster, pod: Pod, exclude: frozenset[str], mpf: float) -> str | None:
    """The filter's nodes sorted by score, then tried in that order (the planner before its shortcut)."""
    a = c.arrays
    peak = pod_peak_cpu_m(pod)
    ok = (
        a.schedulable
        & c.fit_mask(pod)
        & (a.n_pods > 0)
        & (a.n_pods + a.n_bound + 1 <= a.max_pods)
        & (a.req_cpu + pod.cpu_request_m <= a.cpu_alloc)
        & (a.req_mem + pod.memory_request_mb <= a.mem_alloc)
        & (pod.ephemeral_storage_request_mb <= 0 or a.req_eph + pod.ephemeral_storage_request_mb <= a.eph_alloc)
        & (a.peak + peak <= mpf * a.cpu_alloc + 1e-9)
    )
    for name in (pod.node, *exclude):
        if name in a.pos:
            ok[a.pos[name]] = False
    idx = np.flatnonzero(ok)
    if pod.interference == CPU_BOUND:
        created = a.n_latency_critical[idx]
    elif pod.interference == LATENCY_CRITICAL:
        created = a.n_cpu_bound[idx]
    else:
        created = np.zeros(idx.size)
    fill = (a.peak[idx] + peak) / a.cpu_alloc[idx]
    for j in np.lexsort((idx, -fill, created)):
        target = a.names[int(idx[j])]
        if not c.excluded(pod, target) and _safe(c, pod, target, mpf):
            return target
    return None


@settings(max_examples=150, deadline=None)
@given(st.one_of(clusters_with_pod_rules(), crowded_pairs()), st.data())
def test_the_chosen_node_is_the_first_of_every_node_sorted_by_score_that_passes(
    state: ClusterState, data: st.DataObject
) -> None:
    # the best-scored node is found without sorting (ties: fewest pairs, fullest, then the name)
    c = _Cluster.of(state)
    _moved_a_little(c, data)
    for name in sorted(c.nodes):
        for p in c.pods[name]:
            for mpf in (0.8, 0.9, 1.0):
                for exclude in (frozenset(), frozenset(sorted(c.nodes)[:1])):
                    assert _choose(c, p, exclude, mpf) == choose_by_sorting_every_node(c, p, exclude, mpf)
