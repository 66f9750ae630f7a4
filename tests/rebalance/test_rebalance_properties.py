"""Properties of plan_moves on random small clusters (hypothesis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import cluster, node, pod

from planner.placement_rules import fits_node
from planner.pod_rules import neighbour_problem
from planner.rebalance import (
    RebalanceWeights,
    _Cluster,
    conflicts,
    interference_pairs,
    plan_moves,
    pod_key,
    pod_peak_cpu_m,
)
from scaleahead.types import (
    ClusterState,
    HostPort,
    LabelRequirement,
    LabelSelector,
    MovePod,
    Node,
    NodeSelectorRequirement,
    Pod,
    PodAffinityTerm,
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


HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TERMS = {
    "none": (),
    "own-node": (PodAffinityTerm(LabelSelector((), (LabelRequirement("app", "In", ("{app}",)),)), (), HOST),),
    "own-zone": (PodAffinityTerm(LabelSelector((("app", "{app}"),)), (), ZONE),),
    "kafka-zone": (PodAffinityTerm(LabelSelector((), (LabelRequirement("app", "In", ("kafka",)),)), None, ZONE),),
    "not-etl-node": (
        PodAffinityTerm(LabelSelector((), (LabelRequirement("app", "NotIn", ("etl", "{app}")),)), (), HOST),
    ),
    "labelled-zone": (PodAffinityTerm(LabelSelector((), (LabelRequirement("tier", "Exists"),)), (), ZONE),),
}


def with_app(terms: tuple[PodAffinityTerm, ...], app: str) -> tuple[PodAffinityTerm, ...]:
    def fill(t: PodAffinityTerm) -> PodAffinityTerm:
        assert t.selector is not None
        labels = tuple((k, v.format(app=app)) for k, v in t.selector.match_labels)
        exprs = tuple(
            r._replace(values=tuple(v.format(app=app) for v in r.values)) for r in t.selector.match_expressions
        )
        return t._replace(selector=LabelSelector(labels, exprs))

    return tuple(fill(t) for t in terms)


@st.composite
def clusters_with_pod_rules(draw: st.DrawFn) -> ClusterState:
    """``clusters()`` whose nodes have zones (or none), host names and pod limits, and whose pods have
    anti-affinity terms on either key, host ports, a rule the planner does not model, or are node-bound."""
    state = draw(clusters())
    nodes = tuple(
        replace(
            n,
            labels={HOST: n.name} | ({ZONE: z} if (z := draw(st.sampled_from(["z1", "z2", ""]))) else {}),
            max_pods=draw(st.sampled_from([2, 4, 6, 110, 110])),
        )
        for n in state.nodes
    )
    pods = []
    for p in state.pods:
        kind = draw(st.sampled_from(["plain"] * 6 + ["ports", "ports", "unmovable", "bound"]))
        p = replace(
            p,
            anti_affinity_terms=with_app(TERMS[draw(st.sampled_from(["none"] * 4 + sorted(TERMS)))], p.owner),
            labels={**p.labels, **({"tier": "x"} if draw(st.booleans()) else {})},
        )
        if kind == "ports":
            p = replace(
                p,
                host_ports=(
                    HostPort(draw(st.sampled_from([80, 9100])), "TCP", draw(st.sampled_from(["", "10.0.0.1"]))),
                ),
            )
        elif kind == "unmovable":
            p = replace(p, unmovable="it has required pod affinity, which the planner does not model")
        elif kind == "bound":
            # class none: the planner does not count a node-bound pod's class (it never moves)
            p = replace(p, node_bound=True, owner="", host_ports=(HostPort(9100),), interference="none")
        pods.append(p)
    return ClusterState(nodes=nodes, pods=tuple(pods), pdbs=state.pdbs)


def scheduler_refuses(
    pod: Pod,
    node: Node,
    where: dict[str, str],
    by_key: dict[str, Pod],
    nodes: dict[str, Node],
    pod_limit: bool = True,
) -> str:
    """What kube-scheduler's NodeResourcesFit (pods), NodePorts and InterPodAffinity filters say of
    ``pod`` on ``node`` with the other pods where ``where`` has them; written out pod by pod."""
    me = pod_key(pod)
    here = [by_key[k] for k, n in where.items() if n == node.name and k != me]
    if pod_limit and len(here) + 1 > node.max_pods:
        return "pod limit"
    for q in here:
        if conflicts(pod, q):
            return f"shorthand anti-affinity with {pod_key(q)}"
        for a in pod.host_ports:
            for b in q.host_ports:
                if (a.port, a.protocol) == (b.port, b.protocol) and (not a.host_ip or not b.host_ip or a == b):
                    return f"host port {a.port} with {pod_key(q)}"
    for k, n in where.items():
        q, there = by_key[k], nodes[n]
        if k == me:
            continue
        for holder, other, t, ns in [(pod, q, t, pod.namespace) for t in pod.anti_affinity_terms] + [
            (q, pod, t, q.namespace) for t in q.anti_affinity_terms
        ]:
            mine = node.labels.get(t.topology_key)
            if mine is not None and there.labels.get(t.topology_key) == mine and t.selects(other, ns):
                return f"anti-affinity of {pod_key(holder)} ({t.topology_key}) with {pod_key(q)}"
    return ""


@settings(max_examples=300, deadline=None)
@given(clusters_with_pod_rules(), st.integers(1, 6), st.booleans())
def test_every_move_is_one_the_scheduler_accepts_by_pod_limit_host_ports_and_anti_affinity_in_every_domain(
    state: ClusterState, max_moves: int, separation_only: bool
) -> None:
    weights = RebalanceWeights(node_freed=0.0) if separation_only else None  # swaps and exchanges too
    by_key = {pod_key(p): p for p in state.pods}
    nodes = {n.name: n for n in state.nodes}
    where = {k: p.node for k, p in by_key.items()}
    moves = plan_moves(state, max_moves, weights=weights)
    for m in moves:
        key = f"{m.namespace}/{m.pod}"
        moved = by_key[key]
        assert not moved.unmovable and not moved.node_bound
        assert where[key] == m.from_node
        assert scheduler_refuses(moved, nodes[m.to_node], where, by_key, nodes) == "", m.reason.message
        where[key] = m.to_node
    assert interference_pairs(applied(state, moves)) <= interference_pairs(state.pods)


@settings(max_examples=200, deadline=None)
@given(clusters_with_pod_rules(), st.data())
def test_the_filters_indexes_refuse_exactly_what_the_scheduler_refuses_before_and_after_moves(
    state: ClusterState, data: st.DataObject
) -> None:
    # the filter reads anti-affinity terms through an index by domain, kept up to date as pods move;
    # it must agree with the rules written out pod by pod, or moves are lost (or left to the safety check)
    c = _Cluster.of(state)
    nodes = {n.name: n for n in state.nodes}
    by_key = {pod_key(p): p for p in state.pods}
    where = {k: p.node for k, p in by_key.items()}
    for _ in range(3):
        for key in sorted(by_key):
            for name in sorted(n for n in nodes if n != where[key]):  # the filter never offers its own node
                expected = scheduler_refuses(by_key[key], nodes[name], where, by_key, nodes, pod_limit=False)
                assert c.excluded(by_key[key], name) == bool(expected), (key, name, expected)
        movers = sorted(k for k, p in by_key.items() if not p.node_bound)
        if not movers:
            break
        key = data.draw(st.sampled_from(movers))
        to = data.draw(st.sampled_from(sorted(n for n in nodes if n != where[key])))
        by_key[key] = c.move(by_key[key], to)
        where[key] = to


@settings(max_examples=200, deadline=None)
@given(clusters_with_pod_rules(), st.data())
def test_the_safety_checks_narrowed_neighbours_decide_as_every_pod_of_the_cluster_would(
    state: ClusterState, data: st.DataObject
) -> None:
    # the safety check gives neighbour_problem only the pods that could refuse the move
    # (_Cluster.neighbours: not every pod of a zone); on every pod of the cluster it must decide the same
    c = _Cluster.of(state)
    nodes = {n.name: n for n in state.nodes}
    by_key = {pod_key(p): p for p in state.pods}
    for _ in range(3):
        everyone = [(p, nodes[p.node]) for p in by_key.values()]
        for key in sorted(by_key):
            for name in sorted(n for n in nodes if n != by_key[key].node):
                narrowed = neighbour_problem(by_key[key], nodes[name], c.neighbours(name, by_key[key]))
                full = neighbour_problem(by_key[key], nodes[name], everyone)
                assert (narrowed is None) == (full is None), (key, name, narrowed, full)
        movers = sorted(k for k, p in by_key.items() if not p.node_bound)
        if not movers:
            break
        key = data.draw(st.sampled_from(movers))
        to = data.draw(st.sampled_from(sorted(n for n in nodes if n != by_key[key].node)))
        by_key[key] = c.move(by_key[key], to)


@st.composite
def clusters_with_ephemeral_storage(draw: st.DrawFn) -> ClusterState:
    """``clusters`` whose nodes have some allocatable ephemeral storage (0: they report none) and
    whose pods request some (most of them) or none."""
    state = draw(clusters())
    nodes = tuple(replace(n, ephemeral_storage_mb=draw(st.sampled_from([0, 300, 1000, 4000]))) for n in state.nodes)
    pods = tuple(
        replace(p, ephemeral_storage_request_mb=draw(st.sampled_from([0, 50, 200, 600, 1500]))) for p in state.pods
    )
    return ClusterState(nodes=nodes, pods=pods, pdbs=state.pdbs)


@settings(max_examples=300, deadline=None)
@given(clusters_with_ephemeral_storage(), st.integers(1, 6), st.booleans())
def test_a_pod_that_requests_ephemeral_storage_moves_only_where_the_scheduler_finds_room_for_it(
    state: ClusterState, max_moves: int, separation_only: bool
) -> None:
    # NodeResourcesFit: a pod that requests ephemeral storage fits a node only if the node's pods'
    # requests with its own stay within the node's allocatable (0 when the node reports none); a
    # pod that requests none is not checked. Applied one by one (exchanges too)
    weights = RebalanceWeights(node_freed=0.0) if separation_only else None
    where = {pod_key(p): p.node for p in state.pods}
    by_key = {pod_key(p): p for p in state.pods}
    nodes = {n.name: n for n in state.nodes}
    for m in plan_moves(state, max_moves, weights=weights):
        key = f"{m.namespace}/{m.pod}"
        where[key] = m.to_node
        if by_key[key].ephemeral_storage_request_mb > 0:
            here = [by_key[k] for k, n in where.items() if n == m.to_node]
            assert sum(p.ephemeral_storage_request_mb for p in here) <= nodes[m.to_node].ephemeral_storage_mb, m
