"""plan_moves never targets a node the pod's own node rules exclude: nodeSelector, required node
affinity, taints it does not tolerate (the replacement would stay Pending there)."""

from __future__ import annotations

from dataclasses import replace

from rebalance_builders import cluster, node, pod

from planner.rebalance import RebalanceWeights, interference_pairs, plan_moves
from scaleahead.types import MovePod, Node, NodeSelectorRequirement, Pod, Taint, Toleration


def moves_of(result: tuple[MovePod, ...]) -> list[tuple[str, str, str]]:
    return [(m.pod, m.from_node, m.to_node) for m in result]


def zoned(name: str, zone: str, taints: tuple[Taint, ...] = ()) -> Node:
    return replace(node(name), labels={"zone": zone}, taints=taints)


def three_nodes(b: Node | None = None) -> list[Node]:
    # a is nearly empty; b is the fullest node that fits (packing picks it), c the other one
    return [zoned("a", "z1"), b or zoned("b", "z1"), zoned("c", "z2")]


def drained_web(**rules: object) -> list[Pod]:
    return [
        replace(pod("web-1", "a", 1000), **rules),
        pod("db-1", "b", 6000, owner=""),
        pod("db-2", "c", 3000, owner=""),
    ]


def test_without_rules_the_drain_goes_to_the_fullest_node() -> None:
    assert moves_of(plan_moves(cluster(three_nodes(), drained_web()), max_moves=2)) == [("web-1", "a", "b")]


def test_a_drain_goes_only_to_a_node_the_pods_node_selector_selects() -> None:
    state = cluster(three_nodes(), drained_web(node_selector={"zone": "z2"}))
    assert moves_of(plan_moves(state, max_moves=2)) == [("web-1", "a", "c")]


def test_a_drain_goes_only_to_a_node_the_pods_required_node_affinity_selects() -> None:
    not_b = ((NodeSelectorRequirement("metadata.name", "NotIn", ("b",), field=True),),)
    assert moves_of(plan_moves(cluster(three_nodes(), drained_web(required_node_terms=not_b)), 2)) == [
        ("web-1", "a", "c")
    ]
    in_z2_or_gpu = ((NodeSelectorRequirement("zone", "In", ("z2",)),), (NodeSelectorRequirement("gpu", "Exists"),))
    assert moves_of(plan_moves(cluster(three_nodes(), drained_web(required_node_terms=in_z2_or_gpu)), 2)) == [
        ("web-1", "a", "c")
    ]


def test_a_drain_avoids_a_node_whose_taint_the_pod_does_not_tolerate() -> None:
    gpu_only = zoned("b", "z1", taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    assert moves_of(plan_moves(cluster(three_nodes(gpu_only), drained_web()), 2)) == [("web-1", "a", "c")]
    tolerant = drained_web(tolerations=(Toleration("dedicated", "Equal", "gpu", "NoSchedule"),))
    assert moves_of(plan_moves(cluster(three_nodes(gpu_only), tolerant), 2)) == [("web-1", "a", "b")]
    evicting = zoned("b", "z1", taints=(Taint("maintenance", "", "NoExecute"),))
    assert moves_of(plan_moves(cluster(three_nodes(evicting), drained_web()), 2)) == [("web-1", "a", "c")]
    preferred = zoned("b", "z1", taints=(Taint("spot", "true", "PreferNoSchedule"),))  # not a filter
    assert moves_of(plan_moves(cluster(three_nodes(preferred), drained_web()), 2)) == [("web-1", "a", "b")]


def test_a_node_is_not_drained_when_its_pod_may_run_nowhere_else() -> None:
    state = cluster(three_nodes(), drained_web(node_selector={"zone": "z3"}))
    assert plan_moves(state, max_moves=4) == ()


def test_a_separation_goes_only_where_the_pods_rules_allow() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    pods = [
        replace(pod("cart-1", "a", 1000, cls="latency-critical"), node_selector={"zone": "z1"}),
        pod("etl-1", "a", 3000, cls="cpu-bound", owner=""),
        pod("etl-2", "a", 3000, cls="cpu-bound", owner=""),
        pod("kafka-1", "b", 3000, cls="io-bound", owner=""),
        pod("kafka-2", "c", 6000, cls="io-bound", owner=""),  # c is fuller: packing alone picks it
    ]
    assert moves_of(plan_moves(cluster(nodes, pods), max_moves=1)) == [("cart-1", "a", "b")]
    pods[0] = replace(pods[0], node_selector={"zone": "z3"})
    assert plan_moves(cluster(nodes, pods), max_moves=4) == ()


def swappable(pinned: str) -> list[Pod]:
    # two mixed nodes; a swap of one of a's pods with the opposite class on b makes both pure, but
    # ``pinned`` may only run in zone z1 (node a)
    pods = [
        pod("cart-1", "a", 1000, cls="latency-critical"),
        pod("etl-1", "a", 2000, cls="cpu-bound"),
        pod("cart-2", "b", 1000, cls="latency-critical"),
        pod("etl-2", "b", 2000, cls="cpu-bound"),
    ]
    return [replace(p, node_selector={"zone": "z1"}) if p.name == pinned else p for p in pods]


def test_a_swap_moves_only_pods_whose_rules_allow_the_other_node() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    no_drain = RebalanceWeights(node_freed=0.0)
    for pinned, expected in (
        ("etl-1", {("cart-1", "b"), ("etl-2", "a")}),
        ("cart-1", {("etl-1", "b"), ("cart-2", "a")}),
    ):
        state = cluster(nodes, swappable(pinned))
        result = plan_moves(state, max_moves=2, weights=no_drain)
        assert [m.reason.code for m in result] == ["rebalance.swap", "rebalance.swap"], pinned
        assert {(m.pod, m.to_node) for m in result} == expected, pinned
        moved = {m.pod: m.to_node for m in result}
        assert interference_pairs([replace(p, node=moved.get(p.name, p.node)) for p in state.pods]) == 0


def test_no_swap_onto_a_tainted_node() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2", taints=(Taint("dedicated", "db", "NoSchedule"),))]
    state = cluster(nodes, swappable(pinned=""))  # b's own pods were there before the taint
    assert plan_moves(state, max_moves=4, weights=RebalanceWeights(node_freed=0.0)) == ()
    tolerant = [replace(p, tolerations=(Toleration("", "Exists"),)) for p in state.pods]
    assert len(plan_moves(cluster(nodes, tolerant), max_moves=2, weights=RebalanceWeights(node_freed=0.0))) == 2


def test_an_exchange_skips_a_pod_its_rules_keep_on_its_node() -> None:
    # the 2-for-1 exchange cart-1 + shop-1 <-> train-1 cuts most pairs per move; with shop-1
    # pinned to a, the best left is a 1-for-1 swap of cart-1 and train-1
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    pods = [
        pod("etl-1", "a", 4000, cls="cpu-bound"),
        pod("etl-2", "a", 3000, cls="cpu-bound"),
        pod("cart-1", "a", 500, cls="latency-critical"),
        replace(pod("shop-1", "a", 500, cls="latency-critical"), node_selector={"zone": "z1"}),
        pod("api-1", "b", 4000, cls="latency-critical"),
        pod("api-2", "b", 2500, cls="latency-critical"),
        pod("train-1", "b", 1000, cls="cpu-bound"),
    ]
    result = plan_moves(cluster(nodes, pods), max_moves=3)
    assert [(m.pod, m.to_node, m.reason.code) for m in result] == [
        ("cart-1", "b", "rebalance.swap"),
        ("train-1", "a", "rebalance.swap"),
    ]
