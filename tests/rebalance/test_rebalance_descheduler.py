"""The descheduler peers on small clusters computed by hand (10 cores / 10,000 MB nodes)."""

from __future__ import annotations

from dataclasses import replace

from rebalance_builders import cluster, node, pod

from scaleahead.bench.descheduler import run_descheduler
from scaleahead.bench.rebalance import apply_moves
from scaleahead.types import (
    HostPort,
    LabelSelector,
    MovePod,
    PodAffinityTerm,
    PodDisruptionBudget,
    Reason,
    Taint,
    Toleration,
)


def where(c: object) -> dict[str, str]:
    return {p.name: n for n, ps in c.pods.items() for p in ps}  # type: ignore[attr-defined]


def test_high_node_utilization_empties_a_node_under_20_percent_onto_the_most_allocated_node() -> None:
    # a: 10 % requested (underutilized), b: 50 %, c: 60 %; MostAllocated picks c (70 % > 60 % after)
    state = cluster(
        [node("a"), node("b"), node("c")], [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)]
    )
    c, pending = run_descheduler(state, "high")
    assert [p.name for p in c.evicted] == ["web-1"]
    assert where(c) == {"web-1": "c", "db-1": "b", "db-2": "c"}
    assert pending == []
    assert c.refused == 0


def test_high_node_utilization_eviction_is_refused_by_a_pdb() -> None:
    state = cluster(
        [node("a"), node("b"), node("c")],
        [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)],
        [PodDisruptionBudget("app", "web-pdb", "web", 0)],
    )
    c, _ = run_descheduler(state, "high")
    assert c.evicted == []
    assert c.refused == 1
    assert where(c)["web-1"] == "a"


def test_high_node_utilization_does_nothing_when_every_node_is_underutilized() -> None:
    state = cluster([node("a"), node("b")], [pod("web-1", "a", 1000), pod("db-1", "b", 1500)])
    c, _ = run_descheduler(state, "high")
    assert c.evicted == []


def test_low_node_utilization_moves_from_a_node_over_50_percent_to_the_one_under_20_until_it_is_at_50() -> None:
    # b is at 70 %: evicting api-1 (30 %) brings it to 40 %, below the 50 % target, so it stops;
    # LeastAllocated scores a 60 (40 % after), b 30, c 40: api-1 lands on a.
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("web-1", "a", 1000),
            pod("api-1", "b", 3000),
            pod("api-2", "b", 2000),
            pod("api-3", "b", 2000),
            pod("db-1", "c", 3000),
        ],
    )
    c, pending = run_descheduler(state, "low")
    assert [p.name for p in c.evicted] == ["api-1"]
    assert where(c)["api-1"] == "a"
    assert pending == []


def test_low_node_utilization_stops_when_the_underutilized_nodes_are_full() -> None:
    # a can take 50 % - 19 % = 31 % of a node: after api-1 (30 %) 1 % is left, after api-2 none
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 1900), pod("api-1", "b", 3000), pod("api-2", "b", 3000), pod("api-3", "b", 3000)],
    )
    c, _ = run_descheduler(state, "low")
    assert [p.name for p in c.evicted] == ["api-1", "api-2"]


def test_the_scheduler_puts_an_evicted_pod_back_on_its_node_when_no_other_node_fits() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 1000), pod("db-1", "b", 9500, mem=9500)],
    )
    # HighNodeUtilization evicts web-1 (a at 10 %); b cannot take it (9,500 + 1,000 > 10,000), but a can
    c, pending = run_descheduler(state, "high")
    assert pending == []
    assert where(c)["web-1"] == "a"


def test_the_scheduler_places_an_evicted_pod_only_where_its_node_rules_allow() -> None:
    # as in the first test, MostAllocated would pick c; c's taint (not tolerated), or web-1's node
    # selector (zone z2: a and b), leaves b
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)]
    tainted = [replace(n, taints=(Taint("dedicated", "db", "NoSchedule"),)) if n.name == "c" else n for n in nodes]
    c, pending = run_descheduler(cluster(tainted, pods), "high")
    assert where(c)["web-1"] == "b" and pending == []
    zoned = [replace(n, labels={"zone": "z1" if n.name == "c" else "z2"}) for n in nodes]
    selective = [replace(p, node_selector={"zone": "z2"}) if p.name == "web-1" else p for p in pods]
    c, pending = run_descheduler(cluster(zoned, selective), "high")
    assert where(c)["web-1"] == "b" and pending == []


def test_a_move_to_a_node_the_pods_rules_exclude_is_not_bound_there() -> None:
    # the benchmark binds a policy's move to its target only if the scheduler's filter accepts it
    nodes = [node("a"), replace(node("b"), taints=(Taint("dedicated", "db", "NoSchedule"),)), node("c")]
    state = cluster(nodes, [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)])
    move = MovePod("app", "web-1", "a", "b", Reason("test", "move web-1 a -> b"))
    outcome = apply_moves(state, (move,))
    assert outcome.placement["app/web-1"] == "a"  # LeastAllocated: a (0 % after eviction) over c
    tolerant = replace(state, pods=tuple(replace(p, tolerations=(Toleration("", "Exists"),)) for p in state.pods))
    assert apply_moves(tolerant, (move,)).placement["app/web-1"] == "b"


def test_the_scheduler_refuses_a_node_at_its_pod_limit_a_taken_host_port_and_a_zone_anti_affinity() -> None:
    # as in the first test, MostAllocated would pick c; each rule below keeps web-1 off c, leaving b
    nodes = [replace(node(n), labels={"zone": "z1" if n == "c" else "z2"}) for n in ("a", "b", "c")]
    pods = [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)]
    full = [replace(n, max_pods=1) if n.name == "c" else n for n in nodes]
    ported = [replace(p, host_ports=(HostPort(9100),)) if p.name in ("web-1", "db-2") else p for p in pods]
    zone = (PodAffinityTerm(LabelSelector((("app", "web"),)), (), "zone"),)
    with_term = [replace(p, anti_affinity_terms=zone) if p.name == "db-2" else p for p in pods]
    for state in (cluster(full, pods), cluster(nodes, ported), cluster(nodes, with_term)):
        c, pending = run_descheduler(state, "high")
        assert where(c)["web-1"] == "b" and pending == []
    # db-2's zone rule selects pods labelled app=web: relabelled, web-1 is not one, and lands on c
    relabelled = [replace(p, labels={"app": "api"}) if p.name == "web-1" else p for p in with_term]
    c, _ = run_descheduler(cluster(nodes, relabelled), "high")
    assert where(c)["web-1"] == "c"


def test_the_scheduler_weighs_ephemeral_storage_only_for_a_pod_that_requests_some() -> None:
    # NodeResourcesFit: MostAllocated would pick c; c has room for no ephemeral storage (it reports
    # none), so a pod that requests some lands on b, and one that requests none still on c
    nodes = [replace(node(n), ephemeral_storage_mb=0 if n == "c" else 1000) for n in ("a", "b", "c")]
    pods = [pod("web-1", "a", 1000), pod("db-1", "b", 5000), pod("db-2", "c", 6000)]
    c, _ = run_descheduler(cluster(nodes, pods), "high")
    assert where(c)["web-1"] == "c"
    disk = [replace(p, ephemeral_storage_request_mb=50) if p.name == "web-1" else p for p in pods]
    c, pending = run_descheduler(cluster(nodes, disk), "high")
    assert where(c)["web-1"] == "b" and pending == []
