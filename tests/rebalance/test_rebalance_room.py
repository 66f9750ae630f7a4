"""Rebalancing keeps room for the pods the same plan adds (``Incoming``): a drain that would leave
the plan's scale-up less room than the cluster had is not proposed, and a plan note names it."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import cluster, node, pod
from test_rebalance_properties import RULES, applied, clusters, clusters_with_node_rules

import planner.rebalance as rebalance
from planner import plan
from planner.planning import incoming_pods
from planner.rebalance import ROOM_SHAPES, Incoming, _Cluster, _shapes, plan_moves
from planner.rebalance import _room as _room_of_arrays
from scaleahead.types import ClusterState, MovePod, Pod, ScaleTo, SetWarmPool, WorkloadRef, WorkloadState

sys.path.insert(0, str(Path(__file__).parents[1] / "planner"))
from planner_helpers import flat_forecast, service_policy  # noqa: E402


def plan_moves_and_notes(state: ClusterState, max_moves: int, **kw):  # type: ignore[no-untyped-def]
    """``plan_moves``'s moves and the notes it adds."""
    notes: list[str] = []
    return plan_moves(state, max_moves, notes=notes, **kw), tuple(notes)


def _room(c: _Cluster, incoming: tuple[Incoming, ...], released: frozenset[str]) -> int:
    """The room for ``incoming`` on the cluster as it stands."""
    a = c.arrays
    return _room_of_arrays(a, a.req_cpu, a.req_mem, a.n_pods, incoming, released)


#: a: 1 small pod, b: 6 cores, c: 3 cores (10 cores each): freeing a (onto b) or c (onto b) are the drains
THREE = cluster(
    [node("a"), node("b"), node("c")],
    [pod("web-1", "a", 1000), pod("db-1", "b", 6000), pod("db-2", "c", 3000)],
)


def api(count: int, cpu: float = 3000, mem: float = 3000) -> Incoming:
    return Incoming("Deployment/app/api", cpu, mem, count)


def test_without_new_pods_the_drain_goes_ahead() -> None:
    moves, notes = plan_moves_and_notes(THREE, max_moves=4)
    assert [(m.pod, m.to_node) for m in moves] == [("web-1", "b")] and notes == ()


def test_a_drain_that_leaves_the_plans_new_pods_less_room_is_not_proposed_and_a_note_says_so() -> None:
    # Before: 3 cores' pods fit 3 on a, 1 on b, 2 on c = 6. Freeing a leaves 1 + 2; freeing c leaves 3 + 0.
    moves, notes = plan_moves_and_notes(THREE, max_moves=4, incoming=(api(6),))
    assert moves == ()
    assert len(notes) == 3  # freeing b (onto c) too
    assert notes[0] == (
        "rebalancing left out freeing a (1 move): the new pods would then fit 3 of 6 on the nodes left, "
        "against 6 before the moves (6 of Deployment/app/api)"
    )
    assert [n.split(":")[0] for n in notes[1:]] == [
        "rebalancing left out freeing c (1 move)",
        "rebalancing left out freeing b (1 move)",
    ]


def test_a_drain_that_leaves_room_for_them_all_goes_ahead() -> None:
    # 3 pods fit on a alone before; after freeing a: 1 on b, 2 on c = 3: no fewer
    moves, notes = plan_moves_and_notes(THREE, max_moves=4, incoming=(api(3),))
    assert [(m.pod, m.to_node) for m in moves] == [("web-1", "b")] and notes == ()


def test_pods_that_never_fit_hold_nothing_back() -> None:
    # 20 GiB of memory each: none fits on any node, before or after
    moves, notes = plan_moves_and_notes(THREE, max_moves=4, incoming=(api(2, mem=20_000),))
    assert len(moves) == 1 and notes == ()


def test_the_room_counts_memory_and_the_pod_limit_too() -> None:
    c = _Cluster.of(THREE)
    assert _room(c, (api(9, cpu=1, mem=3000),), frozenset()) == 6  # memory: 3 + 1 + 2
    tight = cluster([replace(node("a"), max_pods=2), node("b", cpu_m=1000, memory_mb=1000)], [pod("web-1", "a", 10)])
    # a: pod limit 2 with one pod on it -> 1; b: 1000 m / 1 m but its default pod limit (110) -> 5 asked, 4 left
    assert _room(_Cluster.of(tight), (api(5, cpu=1, mem=1),), frozenset()) == 5
    assert _room(_Cluster.of(tight), (api(5, cpu=1, mem=1),), frozenset({"b"})) == 1
    cordoned = cluster([node("a", schedulable=False), node("b")], [pod("web-1", "b", 1000)])
    assert _room(_Cluster.of(cordoned), (api(9, cpu=1000, mem=1000),), frozenset()) == 9


def test_the_largest_pods_are_placed_first() -> None:
    # 4 cores free on each of two nodes: two 3-core pods first, then the two 1-core ones beside them
    two = cluster([node("a", cpu_m=4000), node("b", cpu_m=4000)], [])
    small = Incoming("Deployment/app/small", 1000, 1000, 2)
    assert _room(_Cluster.of(two), (small, api(2)), frozenset()) == 4


def test_incoming_pods_are_the_plans_increases_with_the_read_pod_shapes() -> None:
    up, down, fn, unknown = (WorkloadRef("Deployment", "app", n) for n in ("up", "down", "fn", "unknown"))
    fn = WorkloadRef("KnativeService", "app", "fn")
    shapes = {up: {"requests.cpu": 250, "requests.memory": 512}, down: {"requests.cpu": 1}, fn: {"requests.memory": 64}}
    from scaleahead.types import Reason

    r = Reason("t", "t")
    actions = [
        ScaleTo(up, 2, 5, r),
        ScaleTo(down, 5, 2, r),
        ScaleTo(unknown, 1, 9, r),
        SetWarmPool(fn, 0, 2, 60.0, r),
    ]
    assert incoming_pods(actions, shapes) == (
        Incoming("Deployment/app/up", 250.0, 512.0, 3),
        Incoming("KnativeService/app/fn", 0.0, 64.0, 2),
    )


def test_plan_keeps_room_for_its_own_scale_up_and_notes_the_drain_it_left_out() -> None:
    ref = WorkloadRef("Deployment", "shop", "web")
    pol = service_policy("web", maxReplicas=20)
    now = 1_000_000.0
    base = replace(THREE, workloads={ref: WorkloadState(ref, 2, 2, 20.0, now - 5)})
    shaped = replace(base, pod_shapes={ref: {"requests.cpu": 3000, "requests.memory": 3000}})
    forecast = {ref: flat_forecast(ref, now - 1, 60.0)}  # 60 req/s at 10 per replica: 6 replicas, 4 new pods
    quiet = plan(forecast, base, [pol], now, max_moves=4)
    assert [type(a).__name__ for a in quiet.changes] == ["ScaleTo", "MovePod"]  # no shape: the drain goes ahead
    kept = plan(forecast, shaped, [pol], now, max_moves=4)
    scale = kept.changes[0]
    assert isinstance(scale, ScaleTo) and (scale.from_replicas, scale.to_replicas) == (2, 6)
    assert not any(isinstance(a, MovePod) for a in kept.actions)
    assert any(
        n.startswith("rebalancing left out freeing a (1 move)") and "4 of Deployment/shop/web" in n for n in kept.notes
    ), kept.notes


@settings(max_examples=60, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(100, 6000), st.integers(100, 6000), st.integers(1, 6)), max_size=3))
def test_the_moves_never_leave_the_new_pods_less_room(state: ClusterState, shapes: list[tuple[int, int, int]]) -> None:
    incoming = tuple(Incoming(f"Deployment/app/w{i}", float(c), float(m), k) for i, (c, m, k) in enumerate(shapes))
    moves = plan_moves(state, max_moves=4, incoming=incoming)
    before = _room(_Cluster.of(state), incoming, frozenset())
    after_state = replace(state, pods=tuple(applied(state, moves)))
    occupied = {p.node for p in state.pods if not p.node_bound}
    freed = frozenset(n for n in occupied if not any(p.node == n and not p.node_bound for p in after_state.pods))
    assert _room(_Cluster.of(after_state), incoming, freed) >= before
    assert plan_moves(state, max_moves=4) == plan_moves(state, max_moves=4, incoming=())


#: (a review's random case) the best step first is freeing n2, which would leave the new pods less
#: room; a separation from n3 comes next, after which freeing n2 leaves them room enough
SEPARATE_THEN_FREE = cluster(
    [node("n0", 8000), node("n1", 8000), node("n2", 4000), node("n3", 8000), node("n4", 10000)],
    [
        pod("w0-0", "n1", 1200),
        pod("w1-1", "n2", 2400, cls="latency-critical"),
        pod("w2-2", "n3", 900, cls="cpu-bound"),
        pod("w3-3", "n4", 2800, cls="cpu-bound"),
        pod("w4-4", "n3", 2200, cls="latency-critical"),
        pod("w5-5", "n1", 2900, cls="latency-critical"),
    ],
)
NEW = (Incoming("Deployment/a/x0", 2500.0, 1.0, 4), Incoming("Deployment/a/x1", 2900.0, 1.0, 3))


def test_a_step_left_out_in_one_round_and_taken_in_a_later_one_is_not_said_to_be_left_out() -> None:
    moves, notes = plan_moves_and_notes(SEPARATE_THEN_FREE, 4, incoming=NEW)
    assert [(m.pod, m.to_node, m.reason.code) for m in moves] == [
        ("w2-2", "n4", "rebalance.separate"),
        ("w1-1", "n1", "rebalance.drain"),
    ]
    assert notes and not any(n.startswith("rebalancing left out freeing n2") for n in notes), notes


#: (a review's case) ten nodes of one small pod each, whose drains would each leave the new pods
#: less room, a mixed node with a cpu-bound / latency-critical pair, and a spare node
TEN_DRAINS = cluster(
    [node(f"s{i}", 4000, 4000) for i in range(10)] + [node("mixed"), node("spare")],
    [pod(f"small{i}-0", f"s{i}", 500) for i in range(10)]
    + [pod("cb-0", "mixed", 2000, cls="cpu-bound"), pod("lc-0", "mixed", 2000, cls="latency-critical")]
    + [pod("x-0", "spare", 1000)],
)
BIG = (Incoming("Deployment/a/new", 3500.0, 3500.0, 14),)


def test_refused_drains_never_keep_a_separation_from_being_checked_and_a_stop_is_said() -> None:
    """Drains rank first; ten are refused, more than the 8 checks a round: the separation still has
    checks of its own and is taken. In the round after, the drains run out of checks again and the
    note says the moves stopped with candidates unchecked."""
    moves, notes = plan_moves_and_notes(TEN_DRAINS, 4, incoming=BIG)
    assert [(m.pod, m.reason.code) for m in moves] == [("cb-0", "rebalance.separate")]
    assert notes[-1] == (
        "rebalancing stopped after 1 move: 8 drains and 8 other steps at most are checked for the room of "
        "the new pods in a round, and 3 more candidate steps were not checked"
    ), notes


def test_at_most_room_checks_steps_are_checked_a_round(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With one check a round for drains (and one for the others), freeing n2 (ranked first, refused)
    leaves the other drains unchecked; the separation after it is checked with its own."""
    monkeypatch.setattr(rebalance, "ROOM_CHECKS", 1)
    moves, notes = plan_moves_and_notes(TEN_DRAINS, 4, incoming=BIG)
    assert [(m.pod, m.reason.code) for m in moves] == [("cb-0", "rebalance.separate")]
    assert [n.split(":")[0] for n in notes] == [
        "rebalancing left out freeing s0 (1 move)",
        "rebalancing left out freeing s1 (1 move)",
        "rebalancing stopped after 1 move",
    ]
    assert notes[-1].endswith("1 drain and 1 other step at most are checked for the room of the new pods in a "
                              "round, and 10 more candidate steps were not checked")  # fmt: skip


def test_the_new_pods_are_placed_as_a_few_shapes_never_smaller_than_theirs() -> None:
    same = tuple(Incoming(f"Deployment/a/w{i}", 2000.0, 4000.0, 3) for i in range(1000))
    assert _shapes(same) == (Incoming("", 2000.0, 4000.0, 3000),)
    few = tuple(Incoming(f"Deployment/a/w{i}", 100.0 + i, 50.0 + i, 1 + i % 5) for i in range(ROOM_SHAPES))
    assert _shapes(few) == tuple(
        Incoming("", i.cpu_request_m, i.memory_request_mb, i.count)
        for i in sorted(few, key=lambda i: (-i.cpu_request_m, -i.memory_request_mb))
    )
    # 300 shapes of 100-399 mCPU and 128 MiB: rounded up to powers of 1.25, 7 cells
    many = tuple(Incoming(f"Deployment/a/w{i}", 100.0 + i, 128.0, 1 + i % 5) for i in range(300))
    shapes = _shapes(many)
    assert len(shapes) <= ROOM_SHAPES and sum(s.count for s in shapes) == sum(i.count for i in many)
    cells = sorted(s.cpu_request_m for s in shapes)
    for i in many:  # in the smallest cell at least as large, which is less than 1.25 times it
        cell = next(c for c in cells if c >= i.cpu_request_m)
        assert cell < 1.25 * i.cpu_request_m
    # a review's case: 250 pods of 100m beside 32 one-pod workloads of about 12 cores were counted at
    # 12 cores (one run of pod counts); on the grid they stay small, and freeing a is refused
    mixed = (Incoming("Deployment/a/small", 100.0, 100.0, 250),) + tuple(
        Incoming(f"Deployment/a/big{i}", 12_000.0 + i, 12_000.0 + i, 1) for i in range(ROOM_SHAPES)
    )
    assert min(s.cpu_request_m for s in _shapes(mixed)) < 125.0
    moves, notes = plan_moves_and_notes(THREE, 4, incoming=mixed)
    assert moves == () and notes[0].startswith("rebalancing left out freeing a (1 move)"), (moves, notes)


#: a: one small pod (1 core; freeing a moves it onto b), b: 6 cores of 10 and the label pool=fast,
#: e: empty (it never receives a moved pod, but new pods fit there)
FAST = cluster(
    [node("a"), replace(node("b"), labels={"pool": "fast"}), node("e")],
    [pod("x-1", "a", 1000), pod("db-1", "b", 6000)],
)


def fast_pods(count: int = 1) -> Incoming:
    rules = Pod("app", "", "", 3500, 3500, owner="api", node_selector={"pool": "fast"})
    return Incoming("Deployment/app/api", 3500, 3500, count, rules)


def test_the_room_kept_for_new_pods_is_on_the_nodes_their_rules_allow() -> None:
    """Until 2026-12-07 the new pods counted on any node: a drain could fill the only nodes their
    node selector allows (here b) as long as another node (e) had room, and their replicas then
    stayed Pending."""
    anywhere = replace(fast_pods(), rules=None)
    moves, notes = plan_moves_and_notes(FAST, max_moves=4, incoming=(anywhere,))
    assert moves and notes == (), "counted on any node: e has room, the drain goes ahead"
    moves, notes = plan_moves_and_notes(FAST, max_moves=4, incoming=(fast_pods(),))
    assert moves == ()
    assert notes and notes[0].startswith("rebalancing left out freeing a (1 move): the new pods would then fit 0 of 1")
    c = _Cluster.of(FAST)
    mask = c.fit_mask(fast_pods().rules)  # type: ignore[arg-type]
    a = c.arrays
    assert _room_of_arrays(a, a.req_cpu, a.req_mem, a.n_pods, (fast_pods(3),), frozenset(), (mask,)) == 1
    assert _room_of_arrays(a, a.req_cpu, a.req_mem, a.n_pods, (fast_pods(3),), frozenset()) == 3, "all 3, on a and b"


def test_shapes_keep_node_rules_apart_and_drop_those_of_the_fewest_pods_beyond_the_limit() -> None:
    same = Incoming("Deployment/app/web", 3500, 3500, 2)
    shapes = _shapes((fast_pods(2), same))
    assert [(s.count, s.rules is not None) for s in shapes] == [(2, True), (2, False)], "rules first among equals"
    many = [
        Incoming(f"Deployment/app/w{k}", 100, 100, k + 1, Pod("app", "", "", 100, 100, node_selector={"zone": f"z{k}"}))
        for k in range(rebalance.ROOM_RULES + 3)
    ]
    kept = _shapes(many)
    ruled = [s for s in kept if s.rules is not None]
    assert len(ruled) == rebalance.ROOM_RULES and sum(s.count for s in kept) == sum(i.count for i in many)
    assert {s.rules.node_selector["zone"] for s in ruled} == {f"z{k}" for k in range(3, rebalance.ROOM_RULES + 3)}  # type: ignore[union-attr]
    assert [s.count for s in kept if s.rules is None] == [1 + 2 + 3], "the fewest pods' rules dropped, merged"


def test_each_set_of_rules_gets_its_own_grid_and_the_rounding_always_ends() -> None:
    """A review of 2026-12-07: with the sets' cells in one budget of 32, requests of 0, 1 and more
    (which no factor merges) made the loop endless, and 3 sets of 10,000 workloads counted their
    pods at 17 times their CPU."""
    import random

    rng = random.Random(0)
    sets = [None] + [Pod("app", "", "", 0, 0, node_selector={"pool": f"p{k}"}) for k in range(rebalance.ROOM_RULES)]
    many = [
        Incoming(f"Deployment/app/w{k}", float(rng.randint(100, 2000)), float(rng.randint(64, 4096)), 2, sets[k % 4])
        for k in range(4000)
    ]
    shapes = _shapes(many)
    for rules in sets:
        mine = [s for s in shapes if s.rules is rules or (rules is not None and s.rules == rules)]
        assert 0 < len(mine) <= ROOM_SHAPES
        given = [i for i in many if i.rules is rules]
        assert sum(s.count for s in mine) == sum(i.count for i in given)
        assert sum(s.count * s.cpu_request_m for s in mine) < 2 * sum(i.count * i.cpu_request_m for i in given)
        assert min(s.cpu_request_m for s in mine) >= min(i.cpu_request_m for i in given), "never counted smaller"
    patterns = [
        Incoming(f"Deployment/app/p{k}-{cpu}-{mem}", cpu, mem, 1, sets[1 + k % 3] if k < 24 else None)
        for k in range(36)
        for cpu, mem in ((0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (0.5, 100.0 + k))
    ]
    assert sum(s.count for s in _shapes(patterns)) == len(patterns)  # ends, and loses no pod


def test_incoming_pods_carry_their_templates_rules_and_pending_pods_their_own() -> None:
    from planner.planning import pending_incoming
    from scaleahead.types import Reason

    up = WorkloadRef("Deployment", "app", "up")
    rules = Pod("app", "", "", 250, 512, owner="up", node_selector={"pool": "fast"})
    (inc,) = incoming_pods([ScaleTo(up, 2, 5, Reason("t", "t"))], {up: {"requests.cpu": 250}}, {up: rules})
    assert inc.rules is rules
    waiting = [
        Pod("app", "api-1", "", 500, 500, owner="api-rs", node_selector={"pool": "fast"}),
        Pod("app", "api-2", "", 500, 500, owner="api-rs", node_selector={"pool": "fast"}),
        Pod("app", "api-3", "", 500, 500, owner="api-rs"),
    ]
    got = sorted(pending_incoming(waiting), key=lambda i: i.count)
    assert [(i.count, dict(i.rules.node_selector)) for i in got] == [(1, {}), (2, {"pool": "fast"})]  # type: ignore[union-attr]


def test_each_shape_is_placed_on_the_nodes_of_its_own_rules_those_with_rules_first() -> None:
    """Two shapes of equal requests, one with rules (b only), one without; a has room for one, b
    for one, e for two. Rules first: 1 on b, then 3 on a and e = 4. Without rules first, the 3 would
    take a, b and e, and the one for b would find no room (3). The masks follow the shapes as
    ``_shapes`` ordered them."""
    from planner.rebalance import _Room

    tight = cluster(
        [node("a"), replace(node("b"), labels={"pool": "fast"}), node("e")],
        [pod("x-1", "a", 6500), pod("db-1", "b", 6000)],
    )
    anywhere = Incoming("Deployment/app/web", 3500, 3500, 3)
    room = _Room.of(_Cluster.of(tight), (anywhere, fast_pods()))
    assert [s.rules is not None for s in room.shapes] == [True, False]
    assert room.start == 4
    c = _Cluster.of(tight)
    a = c.arrays
    masks = (None, c.fit_mask(fast_pods().rules))  # type: ignore[arg-type]
    assert _room_of_arrays(a, a.req_cpu, a.req_mem, a.n_pods, (anywhere, fast_pods()), frozenset(), masks) == 4


def test_the_grid_ends_with_cells_no_factor_merges() -> None:
    """Requests of 0, of 1 and of more stay apart at any factor: asked for fewer cells than that,
    the rounding stops (``ROOM_GRID_MAX``) and loses no pod."""
    from planner.rebalance import _grid

    merged = {(cpu, mem): 1 for cpu in (0.0, 1.0, 250.0) for mem in (0.0, 1.0, 512.0)}
    cells = _grid(merged, cap=4)
    assert 4 < len(cells) <= 9 and sum(cells.values()) == 9


def test_plan_keeps_room_on_the_nodes_its_scale_ups_template_allows() -> None:
    """Through ``plan``: the scale-up's template selects pool=fast (``ClusterState.pod_rules``)."""
    ref = WorkloadRef("Deployment", "shop", "api")
    pol = service_policy("api", maxReplicas=20)
    now = 1_000_000.0
    base = replace(
        FAST,
        workloads={ref: WorkloadState(ref, 1, 1, 20.0, now - 5)},
        pod_shapes={ref: {"requests.cpu": 3500, "requests.memory": 3500}},
    )
    forecast = {ref: flat_forecast(ref, now - 1, 15.0)}  # 15 req/s at 10 per replica: 2 replicas, 1 new pod
    anywhere = plan(forecast, base, [pol], now, max_moves=4)
    assert isinstance(anywhere.changes[0], ScaleTo) and any(isinstance(a, MovePod) for a in anywhere.actions)
    ruled = replace(base, pod_rules={ref: fast_pods().rules})
    kept = plan(forecast, ruled, [pol], now, max_moves=4)
    assert isinstance(kept.changes[0], ScaleTo) and not any(isinstance(a, MovePod) for a in kept.actions)
    assert any(
        n.startswith("rebalancing left out freeing a (1 move): the new pods would then fit 0 of 1") for n in kept.notes
    )


@settings(max_examples=60, deadline=None)
@given(
    clusters_with_node_rules(),
    st.lists(
        st.tuples(st.integers(100, 6000), st.integers(100, 6000), st.integers(1, 6), st.sampled_from(sorted(RULES))),
        max_size=4,
    ),
)
def test_the_moves_never_leave_new_pods_with_node_rules_less_room(
    state: ClusterState, shapes: list[tuple[int, int, int, str]]
) -> None:
    """As above, the new pods with node rules (zones, taints): the room counted with their masks."""
    incoming = tuple(
        Incoming(f"Deployment/app/w{i}", float(c), float(m), k, Pod("app", "", "", c, m, **RULES[rule]))
        for i, (c, m, k, rule) in enumerate(shapes)
    )
    moves = plan_moves(state, max_moves=4, incoming=incoming)
    shapes = _shapes(incoming)

    def room(c: _Cluster, freed: frozenset[str]) -> int:  # with the masks worked out here
        a = c.arrays
        masks = tuple(None if s.rules is None else c.fit_mask(s.rules) for s in shapes)
        return _room_of_arrays(a, a.req_cpu, a.req_mem, a.n_pods, shapes, freed, masks)

    after_state = replace(state, pods=tuple(applied(state, moves)))
    occupied = {p.node for p in state.pods if not p.node_bound}
    freed = frozenset(n for n in occupied if not any(p.node == n and not p.node_bound for p in after_state.pods))
    assert room(_Cluster.of(after_state), freed) >= room(_Cluster.of(state), frozenset())
