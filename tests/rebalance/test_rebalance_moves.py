"""plan_moves on hand-built clusters whose best moves are known."""

from __future__ import annotations

from dataclasses import replace

from rebalance_builders import cluster, node, pod

from planner import plan
from planner.rebalance import RebalanceWeights, interference_pairs, plan_moves
from scaleahead.types import MovePod, Pod, PodDisruptionBudget


def moves_of(result: tuple[MovePod, ...]) -> list[tuple[str, str, str]]:
    return [(m.pod, m.from_node, m.to_node) for m in result]


def test_a_nearly_empty_node_is_drained_onto_the_fullest_node_that_fits() -> None:
    state = cluster(
        [node("a"), node("b"), node("c")],
        [pod("web-1", "a", 1000), pod("db-1", "b", 6000), pod("db-2", "c", 3000)],
    )
    result = plan_moves(state, max_moves=5)
    assert moves_of(result) == [("web-1", "a", "b")]
    assert "frees a (its last pod)" in result[0].reason.message
    assert "b peak 70% of allocatable after" in result[0].reason.message
    assert result[0].expected_gain == 1.0
    assert result[0].reason.code == "rebalance.drain"


def test_a_move_names_its_pod_by_uid_where_the_cluster_gave_one() -> None:
    pods = [pod("web-1", "a", 1000), pod("db-1", "b", 6000), pod("db-2", "c", 3000)]
    state = cluster([node("a"), node("b"), node("c")], [replace(p, uid=f"uid-{p.name}") for p in pods])
    (move,) = plan_moves(state, max_moves=5)
    assert move.pod_uid == "uid-web-1" and move.reason.details["pod_uid"] == "uid-web-1"
    (bare,) = plan_moves(cluster([node("a"), node("b"), node("c")], pods), max_moves=5)
    assert bare.pod_uid == "" and "pod_uid" not in bare.reason.details


def test_a_drain_that_needs_more_moves_than_the_budget_is_not_started() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 500), pod("api-1", "a", 500), pod("db-1", "b", 8000, owner="")],
    )
    assert plan_moves(state, max_moves=1) == ()
    assert moves_of(plan_moves(state, max_moves=2)) == [("api-1", "a", "b"), ("web-1", "a", "b")]


def test_a_latency_critical_pod_leaves_the_node_of_two_cpu_bound_pods() -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("cart-1", "a", 2000, cls="latency-critical"),
            pod("etl-1", "a", 3000, cls="cpu-bound"),
            pod("etl-2", "a", 3000, cls="cpu-bound"),
            pod("kafka-1", "b", 5000, cls="io-bound"),
        ],
    )
    result = plan_moves(state, max_moves=1)
    assert moves_of(result) == [("cart-1", "a", "b")]
    assert result[0].expected_gain == 0.5  # two pairs at 0.25
    assert "separates latency-critical app/cart-1 from cpu-bound app/etl-1, app/etl-2" in result[0].reason.message
    assert interference_pairs(state.pods) == 2


def test_no_move_when_the_target_would_exceed_its_allocatable_at_the_forecast_peak() -> None:
    # requests fit (1000 + 6000 <= 10000) but the forecast peaks do not (4000 + 6000 > 0.9 * 10000)
    state = cluster([node("a"), node("b")], [pod("web-1", "a", 1000, peak=4000), pod("db-1", "b", 6000)])
    assert plan_moves(state, max_moves=5) == ()
    assert moves_of(plan_moves(state, max_moves=5, max_peak_fraction=1.0)) == [("web-1", "a", "b")]


def test_no_move_when_requests_do_not_fit_even_if_the_peak_would() -> None:
    state = cluster([node("a"), node("b")], [pod("web-1", "a", 5000, peak=100), pod("db-1", "b", 6000, peak=100)])
    assert plan_moves(state, max_moves=5) == ()


def test_a_pdb_with_no_disruption_left_keeps_its_pods_in_place() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 1000), pod("db-1", "b", 8000, owner="")],
        [PodDisruptionBudget("app", "web-pdb", "web", 0)],
    )
    assert plan_moves(state, max_moves=5) == ()


def test_a_pdb_allowing_one_disruption_blocks_a_drain_that_needs_two_of_its_pods() -> None:
    pods = [pod("web-1", "a", 500), pod("web-2", "a", 500), pod("db-1", "b", 8000, owner="")]
    budget_one = cluster([node("a"), node("b")], pods, [PodDisruptionBudget("app", "web-pdb", "web", 1)])
    budget_two = cluster([node("a"), node("b")], pods, [PodDisruptionBudget("app", "web-pdb", "web", 2)])
    assert plan_moves(budget_one, max_moves=5) == ()
    assert len(plan_moves(budget_two, max_moves=5)) == 2


def test_anti_affinity_keeps_two_replicas_apart() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 1000, anti=("web",)), pod("web-2", "b", 3000, anti=("web",))],
    )
    assert plan_moves(state, max_moves=5) == ()


def test_label_anti_affinity_is_honoured_in_both_directions() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", 1000), pod("db-1", "b", 3000, anti=("app=web",))],
    )
    assert plan_moves(state, max_moves=5) == ()


def test_bare_pods_unschedulable_nodes_and_empty_nodes_are_left_alone() -> None:
    bare = cluster([node("a"), node("b")], [pod("web-1", "a", 1000, owner=""), pod("db-1", "b", 8500)])
    assert plan_moves(bare, max_moves=5) == ()
    cordoned = cluster([node("a"), node("b", schedulable=False)], [pod("web-1", "a", 1000), pod("db-1", "b", 8500)])
    assert plan_moves(cordoned, max_moves=5) == ()
    empty_target = cluster([node("a"), node("b")], [pod("web-1", "a", 1000)])
    assert plan_moves(empty_target, max_moves=5) == ()


def test_drains_come_before_separations_and_the_budget_bounds_them_all() -> None:
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("web-1", "a", 500),
            pod("cart-1", "b", 1000, cls="latency-critical"),
            pod("etl-1", "b", 2000, cls="cpu-bound"),
            pod("kafka-1", "c", 7000, cls="io-bound"),
        ],
    )
    result = plan_moves(state, max_moves=2)
    assert [m.reason.code for m in result] == ["rebalance.drain", "rebalance.separate"]
    assert plan_moves(state, max_moves=1)[0].reason.code == "rebalance.drain"
    assert plan_moves(state, max_moves=0) == ()


def test_a_swap_makes_two_mixed_nodes_pure_when_no_single_move_can() -> None:
    # any single move removes one pair and creates one; swapping etl-1 and cart-2 removes both pairs
    state = cluster(
        [node("a"), node("b")],
        [
            pod("cart-1", "a", 1000, cls="latency-critical"),
            pod("etl-1", "a", 2000, cls="cpu-bound"),
            pod("cart-2", "b", 1000, cls="latency-critical"),
            pod("etl-2", "b", 2000, cls="cpu-bound"),
        ],
    )
    no_drain = RebalanceWeights(node_freed=0.0)
    assert plan_moves(state, max_moves=1, weights=no_drain) == ()
    result = plan_moves(state, max_moves=2, weights=no_drain)
    assert [m.reason.code for m in result] == ["rebalance.swap", "rebalance.swap"]
    # etl-1 <-> cart-2 and cart-1 <-> etl-2 are equally good; either leaves two pure nodes
    assert {(m.pod, m.to_node) for m in result} in (
        {("etl-1", "b"), ("cart-2", "a")},
        {("cart-1", "b"), ("etl-2", "a")},
    )
    assert f"swaps places with app/{result[1].pod}" in result[0].reason.message
    moved = {m.pod: m.to_node for m in result}
    after = [replace(p, node=moved.get(p.name, p.node)) for p in state.pods]
    assert interference_pairs(after) == 0


def two_nearly_full_mixed_nodes(usage: float | None) -> list[Pod]:
    # each node at 85 % of its CPU at the forecast peak: a single move of either mixed pod takes its
    # target above the 90 % cap; trading cart-1 for etl-2 leaves both nodes exactly as full
    return [
        pod("cart-1", "a", 1000, cls="latency-critical", usage=usage),
        pod("etl-1", "a", 1000, cls="cpu-bound", usage=usage),
        pod("web-1", "a", 6500, usage=usage),
        pod("cart-2", "b", 1000, cls="latency-critical", usage=usage),
        pod("etl-2", "b", 1000, cls="cpu-bound", usage=usage),
        pod("web-2", "b", 6500, usage=usage),
    ]


def test_two_full_nodes_swap_pods_when_the_end_state_fits_at_the_forecast_peak() -> None:
    state = cluster([node("a"), node("b")], two_nearly_full_mixed_nodes(usage=600.0))
    no_drain = RebalanceWeights(node_freed=0.0)
    result = plan_moves(state, max_moves=2, weights=no_drain)
    assert [m.reason.code for m in result] == ["rebalance.swap", "rebalance.swap"]
    assert "peak 85% of allocatable after the exchange" in result[0].reason.message
    moved = {m.pod: m.to_node for m in result}
    after = [replace(p, node=moved.get(p.name, p.node)) for p in state.pods]
    assert interference_pairs(after) == 0
    assert plan_moves(state, max_moves=1, weights=no_drain) == ()  # one move alone would break the cap


def test_a_swap_is_not_made_when_the_observed_usage_would_overfill_a_node_in_between() -> None:
    # the same nodes, but the pods already use their forecast peak: while the two pods restart, one
    # node would hold both at 95 % of its CPU
    state = cluster([node("a"), node("b")], two_nearly_full_mixed_nodes(usage=None))
    assert plan_moves(state, max_moves=4, weights=RebalanceWeights(node_freed=0.0)) == ()


def test_two_latency_critical_pods_are_exchanged_for_one_cpu_bound_pod_when_that_cuts_most_pairs_per_move() -> None:
    state = cluster(
        [node("a"), node("b")],
        [
            pod("etl-1", "a", 4000, cls="cpu-bound"),
            pod("etl-2", "a", 3000, cls="cpu-bound"),
            pod("cart-1", "a", 500, cls="latency-critical"),
            pod("shop-1", "a", 500, cls="latency-critical"),
            pod("api-1", "b", 4000, cls="latency-critical"),
            pod("api-2", "b", 2500, cls="latency-critical"),
            pod("train-1", "b", 1000, cls="cpu-bound"),
        ],
    )
    assert interference_pairs(state.pods) == 6
    three = plan_moves(state, max_moves=3)
    assert {m.reason.code for m in three} == {"rebalance.exchange"}
    assert {(m.pod, m.to_node) for m in three} == {("cart-1", "b"), ("shop-1", "b"), ("train-1", "a")}
    assert "exchanged for app/train-1" in next(m for m in three if m.pod == "cart-1").reason.message
    moved = {m.pod: m.to_node for m in three}
    assert interference_pairs([replace(p, node=moved.get(p.name, p.node)) for p in state.pods]) == 0
    assert all(
        "expected gain 0.5 node-equivalents per move (6 interfering pairs fewer in 3 moves)" in m.reason.message
        for m in three
    )
    two = plan_moves(state, max_moves=2)  # the best that fits two moves: a 1-for-1 swap, 3 pairs fewer
    assert [m.reason.code for m in two] == ["rebalance.swap", "rebalance.swap"]


def test_a_drain_puts_a_cpu_bound_pod_on_a_node_without_latency_critical_pods_when_one_fits() -> None:
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("etl-1", "a", 1000, cls="cpu-bound"),
            pod("cart-1", "b", 6000, cls="latency-critical", owner=""),  # b is fuller: packing alone picks it
            pod("kafka-1", "c", 4000, cls="io-bound", owner=""),
        ],
    )
    assert moves_of(plan_moves(state, max_moves=1)) == [("etl-1", "a", "c")]


def test_a_drain_that_could_only_add_an_interfering_pair_is_refused_unless_allowed() -> None:
    state = cluster(
        [node("a"), node("b")],
        [pod("etl-1", "a", 1000, cls="cpu-bound"), pod("cart-1", "b", 6000, cls="latency-critical", owner="")],
    )
    assert plan_moves(state, max_moves=3) == ()
    allowed = plan_moves(state, max_moves=3, drains_may_add_pairs=True)
    assert moves_of(allowed) == [("etl-1", "a", "b")]
    assert "joins 1 latency-critical pod on b" in allowed[0].reason.message


def test_a_drain_that_must_form_a_pair_separates_it_again_in_the_same_step() -> None:
    # etl-1 fits only on b (c is too full for it), where cart-1 is; cart-1 fits on c
    state = cluster(
        [node("a"), node("b"), node("c")],
        [
            pod("etl-1", "a", 3000, cls="cpu-bound"),
            pod("cart-1", "b", 1000, cls="latency-critical"),
            pod("web-1", "b", 3000, owner=""),
            pod("kafka-1", "c", 7000, cls="io-bound", owner=""),
        ],
    )
    assert plan_moves(state, max_moves=1) == ()  # the drain alone would add a pair
    result = plan_moves(state, max_moves=2)
    assert moves_of(result) == [("etl-1", "a", "b"), ("cart-1", "b", "c")]
    assert [m.reason.code for m in result] == ["rebalance.drain", "rebalance.drain"]
    assert "so that freeing a adds no interfering pair" in result[1].reason.message
    assert result[1].reason.details["move_kind"] == "separate"
    moved = {m.pod: m.to_node for m in result}
    assert interference_pairs([replace(p, node=moved.get(p.name, p.node)) for p in state.pods]) == 0


def test_plan_includes_moves_only_when_asked() -> None:
    state = cluster([node("a"), node("b")], [pod("web-1", "a", 1000), pod("db-1", "b", 8000, owner="")])
    assert plan({}, state, [], now=0.0).actions == ()
    asked = plan({}, state, [], now=0.0, max_moves=3)
    assert [type(a).__name__ for a in asked.actions] == ["MovePod"]
    assert asked.changes == asked.actions


def test_one_pdb_over_two_owners_allows_its_disruptions_to_both_together() -> None:
    # web-pdb covers both ReplicaSets of a Deployment mid-rollout: one disruption in all
    pods = [pod("web-1", "a", 200, owner="web-aaa"), pod("web-2", "a", 200, owner="web-bbb")]
    pods += [pod(f"x-{i}", "b", 200, owner="") for i in range(3)]  # bare pods: b stays
    shared = [PodDisruptionBudget("app", "web-pdb", "web-aaa", 1), PodDisruptionBudget("app", "web-pdb", "web-bbb", 1)]
    assert plan_moves(cluster([node("a"), node("b")], pods, shared), max_moves=4) == ()  # a needs 2 disruptions
    two = [replace(p, disruptions_allowed=2) for p in shared]
    assert len(plan_moves(cluster([node("a"), node("b")], pods, two), max_moves=4)) == 2
    # two PDBs of their own (one per owner) allow one each: the drain goes ahead
    own = [PodDisruptionBudget("app", f"{o}-pdb", o, 1) for o in ("web-aaa", "web-bbb")]
    assert len(plan_moves(cluster([node("a"), node("b")], pods, own), max_moves=4)) == 2


def test_node_bound_pods_stay_and_do_not_keep_their_node_from_being_freed() -> None:
    ds = [replace(pod(f"proxy-{n}", n, 300, owner="", ns="kube-system"), node_bound=True) for n in ("a", "b")]
    state = cluster([node("a"), node("b", cpu_m=2000)], [pod("web-1", "a", 500), pod("db-1", "b", 600, owner=""), *ds])
    result = plan_moves(state, max_moves=4)
    assert moves_of(result) == [("web-1", "a", "b")]
    assert "frees a (its last pod)" in result[0].reason.message
    # what is bound to b counts: 600 + 300 + 1000 is above 0.9 x 2000, though 600 + 1000 is not
    bigger = [pod("web-1", "a", 1000), pod("db-1", "b", 600, owner="")]
    assert plan_moves(cluster([node("a"), node("b", cpu_m=2000)], [*bigger, *ds]), max_moves=4) == ()
    assert len(plan_moves(cluster([node("a"), node("b", cpu_m=2000)], bigger), max_moves=4)) == 1


def test_nodes_without_allocatable_or_cordoned_neither_receive_nor_give_pods() -> None:
    pods = [pod("web-1", "z", 100), pod("db-1", "a", 1000, owner=""), pod("api-1", "c", 100)]
    state = cluster([node("z", cpu_m=0), node("a"), node("c", schedulable=False)], pods)
    assert plan_moves(state, max_moves=4) == ()
    # with allocatable reported and the cordon lifted, both drain onto a
    fixed = cluster([node("z"), node("a"), node("c")], pods)
    assert sorted(moves_of(plan_moves(fixed, max_moves=4))) == [("api-1", "c", "a"), ("web-1", "z", "a")]


def test_a_drains_repair_swap_names_the_pair_it_separates() -> None:
    # draining d puts cpu-bound p next to latency-critical l on x; l then swaps places with n on z
    pods = [pod("p-1", "d", 1000, cls="cpu-bound"), pod("l-1", "x", 500, cls="latency-critical")]
    pods += [pod("f-1", "x", 500), pod("n-1", "z", 500), pod("f-2", "z", 2700)]
    result = plan_moves(cluster([node("d", 4000), node("x", 4000), node("z", 4000)], pods), max_moves=4)
    assert sorted(moves_of(result)) == [("l-1", "x", "z"), ("n-1", "z", "x"), ("p-1", "d", "x")]
    (swap,) = [m for m in result if m.pod == "l-1"]
    assert swap.reason.details["move_kind"] == "swap" and swap.reason.details["pairs_separated"] == 1
    assert "separates latency-critical app/l-1 from cpu-bound app/p-1" in swap.reason.message
    assert sum(int(m.reason.details["pairs_created"]) for m in result) == sum(
        int(m.reason.details["pairs_separated"]) for m in result
    )  # the drain forms one pair and its repair removes it


def test_a_node_bound_pod_interferes_where_it_stays() -> None:
    # A latency-critical DaemonSet pod on b: moving the cpu-bound etl-0 there separates it from
    # web-0 but makes a new pair. Node-bound pods were left out of the class counts, so b (fuller,
    # preferred by the score) was chosen and the reason claimed a pair removed that was not.
    daemon = replace(pod("dns-b", "b", 100, cls="latency-critical", owner="", ns="kube-system"), node_bound=True)
    pods = [
        pod("etl-0", "a", 1000, cls="cpu-bound"),
        pod("web-0", "a", 1000, cls="latency-critical"),
        replace(pod("filler-0", "b", 4000), unmovable="it mounts a volume of type persistentVolumeClaim"),
        replace(pod("other-0", "c", 1000), unmovable="it mounts a volume of type persistentVolumeClaim"),
        daemon,
    ]
    (move,) = plan_moves(cluster([node("a"), node("b"), node("c")], pods), max_moves=1)
    assert (move.pod, move.to_node) == ("etl-0", "c")
    after = [replace(p, node=move.to_node) if p.name == move.pod else p for p in pods]
    assert interference_pairs(pods) == 1 and interference_pairs(after) == 0
