"""Fairness under shortage: priority first, then weighted max-min across tenants, every cut explained."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planner_helpers import flat_forecast, service_policy

from planner import plan
from planner.fairness import CLUSTER, Claim, allocate, allocate_pools, alpha_fill, water_fill
from scaleahead.types import ClusterState, ScaleTo, WorkloadRef, WorkloadState

NOW = 1_000_000.0


def claim(
    name: str, tenant: str, want: int, priority: int = 0, weight: float = 1.0, floor: int = 0, fairness: float = 1.0
) -> Claim:
    return Claim(WorkloadRef("Deployment", tenant, name), tenant, priority, weight, want, floor, fairness)


def test_enough_capacity_grants_everything() -> None:
    grants = allocate([claim("a", "t1", 5), claim("b", "t2", 7)], 12)
    assert [g.granted for g in grants] == [5, 7] and all(not g.why for g in grants)


def test_a_higher_priority_is_served_in_full_before_a_lower_one() -> None:
    grants = allocate([claim("low", "t1", 10, priority=0), claim("high", "t2", 8, priority=5)], 10)
    assert [g.granted for g in grants] == [2, 8]
    assert "priority 0" in grants[0].why and "got 2 of 10" in grants[0].why


def test_equal_weights_share_the_shortage_max_min_across_tenants() -> None:
    # 3 tenants want 2, 10 and 10 of 14: the small one gets all it wants, the others 6 each.
    grants = allocate([claim("a", "small", 2), claim("b", "big1", 10), claim("c", "big2", 10)], 14)
    assert [g.granted for g in grants] == [2, 6, 6]


def test_weights_tilt_the_shares() -> None:
    grants = allocate([claim("a", "gold", 20, weight=3), claim("b", "bronze", 20, weight=1)], 20)
    assert [g.granted for g in grants] == [15, 5]


def test_max_min_is_across_tenants_not_across_workloads() -> None:
    # tenant many has three workloads, tenant one has one: the tenants get 6 each, not 3:9.
    claims = [claim(f"m{i}", "many", 10) for i in range(3)] + [claim("o", "one", 10)]
    grants = allocate(claims, 12)
    assert sum(g.granted for g in grants[:3]) == 6 and grants[3].granted == 6


def test_floors_are_served_before_anything_above_them() -> None:
    grants = allocate([claim("a", "t1", 10, floor=4), claim("b", "t2", 10, floor=4, priority=1)], 9)
    # round 1: both floors (4 + 4), round 2: the priority-1 workload takes the 1 left
    assert [g.granted for g in grants] == [4, 5]


def test_tenant_quota_and_cluster_capacity_both_hold_and_notes_say_who_got_less() -> None:
    claims = [claim("a", "shop", 10), claim("b", "shop", 10), claim("c", "blog", 10)]
    grants, notes = allocate_pools(claims, {"shop": 8, CLUSTER: 12})
    assert sum(g.granted for g in grants[:2]) <= 8
    assert sum(g.granted for g in grants) <= 12
    assert [g.granted for g in grants] == [3, 3, 6]
    assert any("tenant shop quota 8" in n for n in notes)
    assert any("cluster capacity 12" in n and "blog 6/10" in n and "shop 6/20" in n for n in notes)


def test_plan_with_a_capacity_cuts_replicas_and_says_why_in_the_reason_and_notes() -> None:
    hi = service_policy("checkout", tenant="shop", priority=10)
    lo = service_policy("search", tenant="blog")
    refs = [hi.workload, lo.workload]
    state = ClusterState({r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs})
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    free = plan(forecasts, state, [hi, lo], NOW)
    assert [a.to_replicas for a in free.actions if isinstance(a, ScaleTo)] == [10, 10]
    short = plan(forecasts, state, [hi, lo], NOW, capacity={CLUSTER: 14})
    a_hi, a_lo = short.actions
    assert isinstance(a_hi, ScaleTo) and isinstance(a_lo, ScaleTo)
    assert (a_hi.to_replicas, a_lo.to_replicas) == (10, 4)
    assert a_lo.reason.code == "fair_share"
    assert "wanted 10" in a_lo.reason.message and "got 4 of 10" in a_lo.reason.message
    assert short.notes and "cluster capacity 14" in short.notes[0]


def test_water_fill_gives_each_the_smaller_of_its_demand_and_the_level() -> None:
    assert water_fill([1, 5, 5], [1, 1, 1], 7) == [1.0, 3.0, 3.0]


claims_strategy = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2", "t3"]),
        st.integers(0, 3),
        st.sampled_from([0.5, 1.0, 2.0]),
        st.integers(0, 30),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(raw=claims_strategy, capacity=st.integers(-5, 150))
def test_allocations_never_exceed_capacity_or_wants_and_use_all_capacity_when_short(
    raw: list[tuple[str, int, float, int, int]], capacity: int
) -> None:
    claims = [claim(f"w{i}", t, want, prio, w, floor) for i, (t, prio, w, want, floor) in enumerate(raw)]
    grants = allocate(claims, capacity)
    total = sum(g.granted for g in grants)
    assert total <= max(capacity, 0)
    assert all(0 <= g.granted <= g.claim.want for g in grants)
    assert total == min(max(capacity, 0), sum(c.want for c in claims))  # work-conserving
    assert all(bool(g.why) == (g.granted < g.claim.want) for g in grants)


@settings(max_examples=200, deadline=None)
@given(raw=claims_strategy, capacity=st.integers(0, 150))
def test_a_lower_priority_gets_nothing_above_its_floor_while_a_higher_one_is_short(
    raw: list[tuple[str, int, float, int, int]], capacity: int
) -> None:
    claims = [claim(f"w{i}", t, want, prio, w, floor) for i, (t, prio, w, want, floor) in enumerate(raw)]
    grants = allocate(claims, capacity)
    for g in grants:
        if g.granted >= g.claim.want:
            continue
        floor_cut = g.granted < min(g.claim.floor, g.claim.want)
        for h in grants:
            if h.claim.priority < g.claim.priority:
                assert h.granted <= min(h.claim.floor, h.claim.want)
                if floor_cut:
                    assert h.granted == 0


@settings(max_examples=200, deadline=None)
@given(wants=st.lists(st.integers(0, 40), min_size=1, max_size=8), capacity=st.integers(0, 200))
def test_equal_weights_one_priority_no_floors_is_integer_max_min(wants: list[int], capacity: int) -> None:
    claims = [claim(f"w{i}", f"t{i}", w) for i, w in enumerate(wants)]
    got = [g.granted for g in allocate(claims, capacity)]
    # Work conserving: never more than asked, and nothing left over while someone is short.
    assert all(0 <= g <= w for g, w in zip(got, wants, strict=True))
    assert sum(got) == min(capacity, sum(wants))
    for i, g in enumerate(got):
        if g < wants[i]:  # a short tenant has at least as much as any other, less one unit of rounding
            assert all(g >= other - 1 for other in got)


def test_a_namespace_pod_quota_is_shared_by_priority_then_weight_and_each_cut_is_explained() -> None:
    gold = service_policy("checkout", tenant="gold", weight=3)
    bronze = service_policy("search", tenant="bronze", weight=1)
    other = service_policy("batch", target={"name": "batch", "namespace": "jobs"})
    refs = [gold.workload, bronze.workload, other.workload]
    workloads = {r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs}
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    free = plan(forecasts, ClusterState(workloads), [gold, bronze, other], NOW)
    assert [a.to_replicas for a in free.actions if isinstance(a, ScaleTo)] == [10, 10, 10]
    short = plan(forecasts, ClusterState(workloads, pod_quotas={"shop": 12}), [gold, bronze, other], NOW)
    a_gold, a_bronze, a_other = short.actions
    assert isinstance(a_gold, ScaleTo) and isinstance(a_bronze, ScaleTo) and isinstance(a_other, ScaleTo)
    # minReplicas 1 each first, then the other 10 pods 3:1 (7.5 and 2.5: the half unit goes to the
    # first tenant by name); the namespace without a quota is not touched.
    assert (a_gold.to_replicas, a_bronze.to_replicas, a_other.to_replicas) == (8, 4, 10)
    assert a_bronze.reason.code == "fair_share" and a_other.reason.code != "fair_share"
    assert "namespace shop pod quota 12 is short of the 20 wanted" in a_bronze.reason.message
    assert "got 4 of 10" in a_bronze.reason.message
    assert any("namespace shop's pod quota leaves room for 12 pods" in n for n in short.notes)
    # A higher priority is served first.
    urgent = service_policy("search", tenant="bronze", priority=5)
    first = plan(forecasts, ClusterState(workloads, pod_quotas={"shop": 12}), [gold, urgent, other], NOW)
    assert [a.to_replicas for a in first.actions if isinstance(a, ScaleTo)] == [2, 10, 10]


def test_a_scoped_quota_pool_cuts_only_the_workloads_its_scopes_select() -> None:
    gold = service_policy("checkout", tenant="gold")
    bronze = service_policy("search", tenant="bronze")
    refs = [gold.workload, bronze.workload]
    workloads = {r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs}
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    # A quota for the "high" PriorityClass (4 pods) counts only checkout's pods; the namespace's
    # own quota (16) counts both.
    state = ClusterState(
        workloads, pod_quotas={"shop": 16, "shop/high": 4}, quota_members={"shop/high": frozenset({gold.workload})}
    )
    p = plan(forecasts, state, [gold, bronze], NOW)
    a_gold, a_bronze = p.actions
    assert isinstance(a_gold, ScaleTo) and isinstance(a_bronze, ScaleTo)
    # checkout is held to 4 by its scoped quota; search gets its 10 of what is left of the 16
    # (the scoped pool is applied first, so checkout's cut is room for search).
    assert (a_gold.to_replicas, a_bronze.to_replicas) == (4, 10)
    assert a_gold.reason.code == "fair_share" and "quota shop/high on pods 4" in a_gold.reason.message
    assert a_bronze.reason.code != "fair_share"
    assert p.notes == (
        "quota shop/high on pods leaves room for 4 pods of the 1 managed workloads its scopes select, short of "
        "the 10 replicas they want: 1 of them get less",
    )
    # A scoped quota on CPU is applied before the namespace's pod quota too: 400m at 100m a replica
    # holds checkout to 4, and search gets its 10 of the 16 pods.
    claims = [Claim(r, "t", 0, 1.0, 10, 0, 1.0, {"requests.cpu": 100}) for r in refs]
    grants, _ = allocate_pools(
        claims, {}, {"shop": 16}, {"shop/high": {"requests.cpu": 400}}, members={"shop/high": frozenset({refs[0]})}
    )
    assert [g.granted for g in grants] == [4, 10]
    # The same numbers as one namespace pool (before scopes were told apart): search was cut too.
    merged = plan(forecasts, ClusterState(workloads, pod_quotas={"shop": 4}), [gold, bronze], NOW)
    assert [a.to_replicas for a in merged.actions if isinstance(a, ScaleTo)] == [2, 2]


@settings(max_examples=200, deadline=None)
@given(
    raw=claims_strategy,
    namespace_pods=st.integers(0, 120),
    scoped=st.lists(st.tuples(st.integers(0, 60), st.sets(st.integers(0, 11), min_size=1)), max_size=3),
)
def test_with_scoped_quota_pools_no_pool_is_overfilled_and_the_workloads_outside_them_are_not_cut_by_them(
    raw: list[tuple[str, int, float, int, int]], namespace_pods: int, scoped: list[tuple[int, set[int]]]
) -> None:
    # every claim in one namespace "ns"; scoped pools select some of them
    claims = [
        Claim(WorkloadRef("Deployment", "ns", f"w{i}"), t, prio, w, want, 0)
        for i, (t, prio, w, want, _) in enumerate(raw)
    ]
    pods = {"ns": namespace_pods}
    members = {}
    for k, (room, picks) in enumerate(scoped):
        refs = frozenset(claims[i].workload for i in picks if i < len(claims))
        if refs:
            pods[f"ns/q{k}"] = room
            members[f"ns/q{k}"] = refs
    grants, _ = allocate_pools(claims, {}, pods, {}, members=members)
    assert all(0 <= g.granted <= g.claim.want for g in grants)
    assert sum(g.granted for g in grants) <= namespace_pods
    for key, refs in members.items():
        assert sum(g.granted for g in grants if g.claim.workload in refs) <= pods[key]
    # the same claims without the scoped pools: a workload in none of them gets no less with them
    # than without, unless the namespace's pool was short anyway
    alone, _ = allocate_pools(claims, {}, {"ns": namespace_pods}, {})
    in_some = frozenset().union(*members.values()) if members else frozenset()
    if sum(c.want for c in claims) <= namespace_pods:
        for g, a in zip(grants, alone, strict=True):
            if g.claim.workload not in in_some:
                assert g.granted == a.granted == g.claim.want


def test_tenant_quota_then_namespace_quota_then_cluster_each_cut_what_is_left() -> None:
    claims = [claim("a", "shop", 10), claim("b", "shop", 10), claim("c", "blog", 10)]
    # Namespaces here are the tenant names (claim()); the shop namespace allows 6 of the 8 its quota gave.
    grants, notes = allocate_pools(claims, {"shop": 8, CLUSTER: 13}, {"shop": 6, "empty": 3})
    assert [g.granted for g in grants] == [3, 3, 7]
    assert "tenant shop quota 8" in grants[0].why and "namespace shop pod quota 6" in grants[0].why
    assert len(notes) == 3 and "namespace shop's pod quota" in notes[1]


@settings(max_examples=200, deadline=None)
@given(
    raw=claims_strategy,
    quotas=st.dictionaries(st.sampled_from(["t1", "t2", "t3", "t4"]), st.integers(0, 60), max_size=4),
    namespaces=st.dictionaries(st.sampled_from(["t1", "t2", "t3", "t4"]), st.integers(0, 60), max_size=4),
    cluster=st.none() | st.integers(0, 150),
)
def test_every_pool_holds_and_a_claim_is_cut_only_by_a_pool_that_is_short(
    raw: list[tuple[str, int, float, int, int]],
    quotas: dict[str, int],
    namespaces: dict[str, int],
    cluster: int | None,
) -> None:
    claims = [claim(f"w{i}", t, want, prio, w, floor) for i, (t, prio, w, want, floor) in enumerate(raw)]
    capacity = dict(quotas) | ({} if cluster is None else {CLUSTER: cluster})
    grants, _ = allocate_pools(claims, capacity, namespaces)
    assert all(0 <= g.granted <= g.claim.want for g in grants)
    for t, q in quotas.items():
        assert sum(g.granted for g in grants if g.claim.tenant == t) <= q
    for ns, q in namespaces.items():
        assert sum(g.granted for g in grants if g.claim.workload.namespace == ns) <= q
    if cluster is not None:
        assert sum(g.granted for g in grants) <= cluster
    for g in grants:
        if g.granted < g.claim.want:
            t, ns = g.claim.tenant, g.claim.workload.namespace
            shorts = [
                t in quotas and sum(c.want for c in claims if c.tenant == t) > quotas[t],
                ns in namespaces and sum(c.want for c in claims if c.workload.namespace == ns) > namespaces[ns],
                cluster is not None and sum(c.want for c in claims) > cluster,
            ]
            assert any(shorts) and g.why


shares_strategy = st.lists(
    st.tuples(st.floats(0.0, 50.0), st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0, 8.0])), min_size=1, max_size=8
)


@settings(max_examples=300, deadline=None)
@given(raw=shares_strategy, capacity=st.floats(0.0, 200.0), alpha=st.sampled_from([0.3, 0.5, 1.0, 2.0, 5.0]))
def test_alpha_fair_shares_meet_the_optimality_conditions(
    raw: list[tuple[float, float]], capacity: float, alpha: float
) -> None:
    demands, weights = [d for d, _ in raw], [w for _, w in raw]
    x = alpha_fill(demands, weights, capacity, alpha)
    assert all(-1e-9 <= xi <= d + 1e-9 for xi, d in zip(x, demands, strict=True))
    assert sum(x) == pytest.approx(min(capacity, sum(demands)), abs=1e-6)
    if sum(demands) <= capacity:
        return
    # KKT of max sum(w * U_alpha(x)): the marginal w * x^-alpha is the same for all below their
    # demand, and no smaller for those at it (they would take more at that price).
    below = [w * xi**-alpha for xi, d, w in zip(x, demands, weights, strict=True) if 1e-9 < xi < d - 1e-9]
    at_cap = [w * d**-alpha for xi, d, w in zip(x, demands, weights, strict=True) if d > 1e-9 and xi >= d - 1e-9]
    if below:
        assert max(below) == pytest.approx(min(below), rel=1e-6)
        assert all(m >= min(below) * (1 - 1e-6) for m in at_cap)


@settings(max_examples=200, deadline=None)
@given(raw=shares_strategy, capacity=st.floats(0.0, 200.0))
def test_more_fairness_moves_shares_from_the_heavier_weights_to_the_lighter(
    raw: list[tuple[float, float]], capacity: float
) -> None:
    demands, weights = [d for d, _ in raw], [w for _, w in raw]
    heavy = max(range(len(raw)), key=lambda i: weights[i])
    light = min(range(len(raw)), key=lambda i: weights[i])
    runs = [alpha_fill(demands, weights, capacity, a) for a in (0.0, 0.5, 1.0, 2.0, 8.0, math.inf)]
    assert all(a >= b - 1e-6 for a, b in itertools.pairwise(r[heavy] for r in runs))
    assert all(a <= b + 1e-6 for a, b in itertools.pairwise(r[light] for r in runs))


def test_fairness_zero_serves_the_heaviest_weight_first_and_infinity_ignores_the_weights() -> None:
    assert alpha_fill([10, 10, 10], [3, 1, 1], 14, 0.0) == [10.0, 2.0, 2.0]
    assert alpha_fill([10, 10, 10], [3, 1, 1], 15, 1.0) == pytest.approx([9.0, 3.0, 3.0])
    assert alpha_fill([10, 10, 10], [3, 1, 1], 15, math.inf) == pytest.approx([5.0, 5.0, 5.0])
    assert alpha_fill([10, 10], [4, 1], 9, 2.0) == pytest.approx([6.0, 3.0])  # 4^(1/2) : 1
    with pytest.raises(ValueError, match="alpha"):
        alpha_fill([1], [1], 1, -1.0)


def test_a_pool_is_shared_at_the_largest_fairness_of_its_policies_and_the_reason_says_which() -> None:
    gold = [claim("a", "gold", 20, weight=3, fairness=0.0), claim("b", "bronze", 20, weight=1, fairness=0.0)]
    assert [g.granted for g in allocate(gold, 20)] == [20, 0]
    assert "alpha-fair share (objective.fairness 0)" in allocate(gold, 20)[1].why
    mixed = [claim("a", "gold", 20, weight=3, fairness=0.0), claim("b", "bronze", 20, weight=1, fairness=1.0)]
    grants, notes = allocate_pools(mixed, {CLUSTER: 20})
    assert [g.granted for g in grants] == [15, 5]  # at 1: in proportion to the weights
    assert "weighted max-min share" in grants[1].why
    assert "objective.fairness range from 0 to 1: shared at 1" in notes[0]


def test_plan_reads_objective_fairness() -> None:
    gold = service_policy("checkout", tenant="gold", weight=4, objective={"fairness": 2.0})
    bronze = service_policy("search", tenant="bronze", weight=1, objective={"fairness": 2.0})
    refs = [gold.workload, bronze.workload]
    state = ClusterState({r: WorkloadState(r, 1, 1, observed_demand=5, observed_at=NOW - 10) for r in refs})
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    shared = plan(forecasts, state, [gold, bronze], NOW, capacity={CLUSTER: 11})
    # minReplicas 1 each, then 9 split 2:1 (the weights' square roots at fairness 2).
    assert [a.to_replicas for a in shared.actions if isinstance(a, ScaleTo)] == [7, 4]
    assert "objective.fairness 2" in shared.actions[1].reason.message


@pytest.mark.parametrize(
    ("fairness", "split"), [(0.0, [10, 2]), (0.5, [10, 2]), (1.0, [9, 3]), (2.0, [8, 4]), (100.0, [6, 6])]
)
def test_the_fairness_table_of_docs_planner_md(fairness: float, split: list[int]) -> None:
    claims = [
        claim("a", "gold", 10, weight=3, fairness=fairness),
        claim("b", "bronze", 10, weight=1, fairness=fairness),
    ]
    assert [g.granted for g in allocate(claims, 12)] == split


@settings(max_examples=200, deadline=None)
@given(raw=claims_strategy, capacity=st.integers(-5, 150), fairness=st.sampled_from([0.0, 0.3, 2.0, 8.0, math.inf]))
def test_at_any_fairness_allocations_hold_the_capacity_the_wants_and_the_priorities(
    raw: list[tuple[str, int, float, int, int]], capacity: int, fairness: float
) -> None:
    claims = [claim(f"w{i}", t, want, prio, w, floor, fairness) for i, (t, prio, w, want, floor) in enumerate(raw)]
    grants = allocate(claims, capacity)
    total = sum(g.granted for g in grants)
    assert all(0 <= g.granted <= g.claim.want for g in grants)
    assert total == min(max(capacity, 0), sum(c.want for c in claims))  # work-conserving, never over
    for g in grants:
        if g.granted < min(g.claim.floor, g.claim.want):  # its floor was cut: no lower priority got anything
            assert all(h.granted == 0 for h in grants if h.claim.priority < g.claim.priority)


def test_a_cpu_quota_is_shared_in_millicores_then_whole_replicas() -> None:
    big = claim("big", "t1", 10)  # 500m a replica
    small = claim("small", "t2", 10)  # 250m a replica
    grants = allocate([big, small], 3000, pool="namespace q quota on requests.cpu", costs=[500, 250], unit="m")
    assert [g.granted for g in grants] == [3, 6]  # 1500m each
    assert "namespace q quota on requests.cpu 3000m is short of the 7500m wanted" in grants[0].why
    # 3100m: 1550m each is 3.1 and 6.2 replicas; the 100m left buys no further replica of either.
    assert [g.granted for g in allocate([big, small], 3100, costs=[500, 250])] == [3, 6]
    # 3250m: 1625m each is 3.25 / 6.5; the 250m left go to the larger fraction, which fits.
    assert [g.granted for g in allocate([big, small], 3250, costs=[500, 250])] == [3, 7]


def test_plan_shares_a_namespace_cpu_quota_by_what_each_replica_asks_for() -> None:
    web = service_policy("web", tenant="a")
    api = service_policy("api", tenant="b")
    refs = [web.workload, api.workload]
    workloads = {r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs}
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    shapes = {web.workload: {"requests.cpu": 1000, "requests.memory": 512}, api.workload: {"requests.cpu": 250}}
    state = ClusterState(workloads, resource_quotas={"shop": {"requests.cpu": 6000}}, pod_shapes=shapes)
    shared = plan(forecasts, state, [web, api], NOW)
    # minReplicas 1 each (1250m), then the 4750m left evenly: api's other 9 need only 2250m, so web
    # gets 2500m, 2 replicas of 1000m; the 500m left cannot buy web's next one. web 3, api 10.
    got = {a.workload.name: a.to_replicas for a in shared.actions if isinstance(a, ScaleTo)}
    assert got["api"] == 10 and got["web"] == 3, got
    assert sum(got[n] * shapes[r]["requests.cpu"] for n, r in zip(("web", "api"), refs, strict=True)) <= 6000
    cut = next(a for a in shared.actions if isinstance(a, ScaleTo) and a.workload.name == "web")
    assert cut.reason.code == "fair_share" and "namespace shop quota on requests.cpu 6000m" in cut.reason.message
    assert any("namespace shop's quota on requests.cpu leaves 6000m" in n for n in shared.notes)
    # Memory has no quota here; the namespace's pods are not limited.
    assert plan(forecasts, ClusterState(workloads, pod_shapes=shapes), [web, api], NOW).notes == ()


@settings(max_examples=200, deadline=None)
@given(
    raw=claims_strategy,
    costs=st.lists(st.sampled_from([100, 250, 500, 1000, 1500]), min_size=12, max_size=12),
    capacity=st.integers(-500, 20000),
    fairness=st.sampled_from([0.0, 1.0, 2.0]),
)
def test_shares_in_units_hold_the_capacity_the_wants_and_leave_less_than_any_missing_replica(
    raw: list[tuple[str, int, float, int, int]], costs: list[int], capacity: int, fairness: float
) -> None:
    claims = [claim(f"w{i}", t, want, prio, w, floor, fairness) for i, (t, prio, w, want, floor) in enumerate(raw)]
    cost = costs[: len(claims)]
    grants = allocate(claims, capacity, costs=cost, unit="m")
    used = sum(g.granted * c for g, c in zip(grants, cost, strict=True))
    assert used <= max(capacity, 0)
    assert all(0 <= g.granted <= g.claim.want for g in grants)
    left = max(capacity, 0) - used
    # Nearly work-conserving: no short claim's next replica would still fit in what is left.
    assert all(c > left for g, c in zip(grants, cost, strict=True) if g.granted < g.claim.want)


def test_warm_instances_of_functions_share_a_namespace_pod_quota_with_the_services() -> None:
    from planner_helpers import function_policy, invocation_forecast

    from scaleahead.types import SetWarmPool

    def retenant(pol, tenant: str, priority: int = 0):
        return pol.model_copy(update={"spec": pol.spec.model_copy(update={"tenant": tenant, "priority": priority})})

    api = service_policy("api", tenant="a", target={"name": "api", "namespace": "fns"})
    f1, f2 = (retenant(function_policy(n), "b") for n in ("f1", "f2"))
    refs = [api.workload, f1.workload, f2.workload]
    workloads = {api.workload: WorkloadState(api.workload, 2, 2, observed_demand=5, observed_at=NOW - 10)}
    workloads |= {r: WorkloadState(r, 0, 0, warm_instances=0) for r in refs[1:]}
    forecasts = {api.workload: flat_forecast(api.workload, NOW, 100.0)}  # wants 10 replicas
    calls = {r: invocation_forecast(r, NOW, [0.9] * 15) for r in refs[1:]}  # each wants 1 warm instance

    def shared(pods: int, pols):
        p = plan(forecasts, ClusterState(workloads, pod_quotas={"fns": pods}), pols, NOW, invocations=calls)
        return p, {a.workload.name: a.to_instances if isinstance(a, SetWarmPool) else a.to_replicas for a in p.actions}

    roomy, got = shared(20, [api, f1, f2])
    assert got == {"api": 10, "f1": 1, "f2": 1} and not any("quota" in n for n in roomy.notes)
    # 3 pods: api's minReplicas first, then tenants a and b get one pod each; b's goes to f1 (by name).
    short, got = shared(3, [api, f1, f2])
    assert got == {"api": 2, "f1": 1, "f2": 0}, got
    cut = next(a for a in short.actions if a.workload.name == "f2")
    assert isinstance(cut, SetWarmPool) and cut.reason.code == "fair_share"
    assert cut.reason.message.startswith("keep 0 warm instances of fns/f2 (has 0): wanted 1 (pre-warm fns/f2 0 -> 1: ")
    assert "namespace fns pod quota 3 is short of the 12 wanted" in cut.reason.message
    assert any("namespace fns's pod quota leaves room for 3 pods of its 3 managed workloads" in n for n in short.notes)
    # The functions' policies at a higher priority: their warm instances come first.
    _, got = shared(3, [api, retenant(f1, "b", 5), retenant(f2, "b", 5)])
    assert got == {"api": 1, "f1": 1, "f2": 1}, got


def test_pods_a_knative_autoscaler_runs_beyond_what_its_claim_wants_are_not_free_for_the_others() -> None:
    """fn's autoscaler runs 8 pods (min-scale 0), which are in the quota's used: the pool of 12 is
    2 free + web's 2 + fn's 8. fn wants 1 warm instance: the 7 other pods it runs are not free,
    so web (wanting 10) gets the 2 free pods, 4 in all, not 11 (the review's over-count)."""
    from planner_helpers import function_policy, invocation_forecast

    web = service_policy("web", target={"name": "web", "namespace": "fns"})
    fn = function_policy("fn")
    workloads = {
        web.workload: WorkloadState(web.workload, 2, 2, observed_demand=5, observed_at=NOW - 10),
        fn.workload: WorkloadState(fn.workload, 0, 0, warm_instances=0),
    }
    forecasts = {web.workload: flat_forecast(web.workload, NOW, 100.0)}  # wants 10 replicas
    calls = {fn.workload: invocation_forecast(fn.workload, NOW, [0.9] * 15)}  # wants 1 warm instance
    state = ClusterState(workloads, pod_quotas={"fns": 12}, pods_running={fn.workload: 8})
    got = plan(forecasts, state, [web, fn], NOW, invocations=calls)
    counts = {a.workload.name: getattr(a, "to_instances", getattr(a, "to_replicas", None)) for a in got.actions}
    assert counts == {"web": 4, "fn": 1}, counts
    # Without the autoscaler's pods (as before the pods were counted): all 12 look free.
    plain = plan(forecasts, ClusterState(workloads, pod_quotas={"fns": 12}), [web, fn], NOW, invocations=calls)
    assert {a.workload.name: getattr(a, "to_replicas", None) for a in plain.actions}["web"] == 10


def test_a_knative_service_wanting_more_than_it_runs_keeps_its_running_pods_in_the_sharing() -> None:
    """The second review's case: kn runs 8 pods (min-scale 3) and wants 10, web runs 2 and wants
    10, 2 pods free. An equal split (6 and 6) handed web 4 of kn's running pods as if free; kn keeps
    its 8 (they run whatever it is granted) and web gets the 2 free pods."""
    web = service_policy("web", target={"name": "web", "namespace": "fns"})
    kn = service_policy("kn", target={"kind": "KnativeService", "name": "kn", "namespace": "fns"})
    workloads = {
        web.workload: WorkloadState(web.workload, 2, 2, observed_demand=5, observed_at=NOW - 10),
        kn.workload: WorkloadState(kn.workload, 3, 3, warm_instances=3, observed_demand=5, observed_at=NOW - 10),
    }
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in (web.workload, kn.workload)}
    state = ClusterState(workloads, pod_quotas={"fns": 12}, pods_running={kn.workload: 8})
    got = {a.workload.name: a.to_replicas for a in plan(forecasts, state, [web, kn], NOW).actions}  # type: ignore[union-attr]
    assert got == {"web": 4, "kn": 8}, got


def test_a_workload_whose_state_was_not_read_is_left_out_of_its_namespace_quota() -> None:
    gold = service_policy("checkout", tenant="gold")
    bronze = service_policy("search", tenant="bronze")
    refs = [gold.workload, bronze.workload]
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in refs}  # each wants 10 replicas
    both = {r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs}
    shared = plan(forecasts, ClusterState(both, pod_quotas={"shop": 10}), [gold, bronze], NOW)
    assert [a.to_replicas for a in shared.actions if isinstance(a, ScaleTo)] == [5, 5]
    # search's state could not be read (its decision: the fallback holds it at minReplicas 1). The
    # quota's 10 (what is left plus checkout's 2 pods) does not hold search's pods, which are in
    # the quota's used; as a claim it would count them twice and cut checkout to 9.
    unread = {gold.workload: both[gold.workload]}
    alone = plan(forecasts, ClusterState(unread, pod_quotas={"shop": 10}), [gold, bronze], NOW)
    assert [a.to_replicas for a in alone.actions if isinstance(a, ScaleTo)] == [10, 1]
    assert alone.notes == ()
    # A tenant quota from the settings still counts it (it does not depend on what was read).
    capped = plan(forecasts, ClusterState(unread), [gold, bronze], NOW, capacity={"gold": 8, "bronze": 0})
    # search keeps its minReplicas 1 even at a quota of 0: the actuator would not go below it.
    assert [a.to_replicas for a in capped.actions if isinstance(a, ScaleTo)] == [8, 1]


def test_a_cut_names_who_took_the_capacity() -> None:
    def ref(name: str) -> WorkloadRef:
        return WorkloadRef("Deployment", "a", name)

    # the low-priority workload's floor (its minReplicas), served first, leaves nothing for the high one
    high, low = Claim(ref("high"), "gold", 1, 1.0, 4, 0), Claim(ref("low"), "bronze", 0, 1.0, 5, 5)
    g_high, g_low = allocate([high, low], 5)
    assert (g_high.granted, g_low.granted) == (0, 5)
    assert g_high.why.endswith(
        "this workload got 0 of 4 (tenant gold, priority 1, weight 1): the floors of every workload (served "
        "first: minReplicas, and what demand observed now needs) took all of it"
    ), g_high.why
    # a higher priority takes what the floors left
    top = Claim(ref("top"), "gold", 2, 1.0, 3, 0)
    grants = allocate([top, Claim(ref("mid"), "silver", 1, 1.0, 4, 0), low], 8)
    assert [g.granted for g in grants] == [3, 0, 5]
    assert grants[1].why.endswith(
        "the floors of every workload (served first: minReplicas, and what demand observed now needs) and higher "
        "priorities than 1 took all of it"
    )
    # no floors, a higher priority alone
    grants = allocate([Claim(ref("top"), "gold", 2, 1.0, 3, 0), Claim(ref("mid"), "silver", 1, 1.0, 4, 0)], 3)
    assert "this workload got 0 of 4 (" in grants[1].why
    assert grants[1].why.endswith("): higher priorities than 1 took all of it"), grants[1].why
    assert allocate([Claim(ref("mid"), "silver", 1, 1.0, 4, 0)], 0)[0].why.endswith("there is none to share")


def test_a_cut_names_the_tenant_weight_it_was_shared_by() -> None:
    claims = [
        Claim(WorkloadRef("Deployment", "a", "w1"), "t", 0, 1.0, 10),
        Claim(WorkloadRef("Deployment", "a", "w3"), "t", 0, 3.0, 10),
        Claim(WorkloadRef("Deployment", "a", "u"), "u", 0, 1.0, 20),
    ]
    g1, g3, gu = allocate(claims, 12)
    assert (g1.granted + g3.granted, gu.granted) == (8, 4)  # tenant t at the mean weight 2, u at 1
    assert "this workload got 2 of 10 (tenant t, priority 0, weight 2, this workload's 1)" in g1.why
    assert "this workload got 6 of 10 (tenant t, priority 0, weight 2, this workload's 3)" in g3.why
    assert "this workload got 4 of 20 (tenant u, priority 0, weight 1)" in gu.why


@pytest.mark.parametrize("costs", [None, [2, 2, 2]])  # replicas, or units (millicores) per replica
def test_a_cut_names_the_weight_and_workloads_of_the_round_that_cut_it(costs: list[int] | None) -> None:
    # a1 (weight 1) wants only its minReplicas 5, served in the first round; a2 (weight 3) and b
    # (weight 1) share the 10 left. Tenant A's weight there is a2's 3 (it alone of A asks), and the
    # share is among 2 workloads. The reason said "weight 2, this workload's 3" and "the 3".
    claims = [
        Claim(WorkloadRef("Deployment", "ns", "a1"), "A", 0, 1.0, 5, floor=5),
        Claim(WorkloadRef("Deployment", "ns", "a2"), "A", 0, 3.0, 10),
        Claim(WorkloadRef("Deployment", "ns", "b"), "B", 0, 1.0, 10),
    ]
    a1, a2, b = allocate(claims, 15 if costs is None else 30, costs=costs, unit="" if costs is None else "m")
    assert (a1.granted, a2.granted, b.granted) == (5, 8, 2)  # 10 (20m) left, shared 3 : 1
    assert "this workload got 8 of 10 (tenant A, priority 0, weight 3): weighted max-min share" in a2.why, a2.why
    assert "this workload got 2 of 10 (tenant B, priority 0, weight 1): weighted max-min share" in b.why, b.why
    left = "10 left" if costs is None else "20m left"
    assert all(g.why.endswith(f"among the 2 priority-0 workloads of the {left}") for g in (a2, b))


def test_with_none_left_a_cut_names_the_weight_of_the_workloads_asking_in_that_round() -> None:
    # Priority 1 takes all 4, nothing is left to share at priority 0: the reason names the weight
    # tenant A would have had there, the mean of a2's and a3's (a1 asks for nothing).
    claims = [
        Claim(WorkloadRef("Deployment", "ns", "top"), "T", 1, 1.0, 4),
        Claim(WorkloadRef("Deployment", "ns", "a1"), "A", 0, 1.0, 0),
        Claim(WorkloadRef("Deployment", "ns", "a2"), "A", 0, 3.0, 5),
        Claim(WorkloadRef("Deployment", "ns", "a3"), "A", 0, 5.0, 5),
    ]
    _, _, a2, a3 = allocate(claims, 4)
    assert a2.granted == a3.granted == 0
    assert "this workload got 0 of 5 (tenant A, priority 0, weight 4, this workload's 3): higher priorities" in (
        a2.why
    ), a2.why
    assert "this workload got 0 of 5 (tenant A, priority 0, weight 4, this workload's 5)" in a3.why, a3.why


def test_a_tenant_share_a_namespace_quota_cuts_goes_to_the_tenants_other_workloads() -> None:
    # tenant x may hold 3; hi (namespace b, priority 1) takes them, but namespace b allows no pod
    hi = Claim(WorkloadRef("Deployment", "b", "hi"), "x", 1, 1.0, 8)
    lo = Claim(WorkloadRef("Deployment", "a", "lo"), "x", 0, 1.0, 1)
    grants, notes = allocate_pools([hi, lo], {"x": 3}, namespace_pods={"b": 0})
    assert [g.granted for g in grants] == [0, 1]  # was [0, 0]: the tenant's 3 went unused
    assert "namespace b pod quota 0 is short of the 3 wanted" in grants[0].why
    assert grants[1].why == ""
    assert notes == [
        "namespace b's pod quota leaves room for 0 pods of its 1 managed workloads, short of the 3 replicas "
        "they want: 1 of them get less"
    ]


# -- review of 2026-12-05 ---------------------------------------------------------------------------
@pytest.mark.parametrize("fairness", [1e-3, 1e-5, 0.01])
@pytest.mark.parametrize("capacity", [1_000, 17_000, 18_000, 20_010])
def test_tiny_fairness_never_grants_more_than_the_capacity(fairness: float, capacity: int) -> None:
    # weight^(1/alpha) spans hundreds of orders of magnitude: the water level must not overflow.
    claims = [claim("a", "A", 10, weight=1.01, fairness=fairness), claim("b", "B", 30_000, fairness=fairness)]
    shares = alpha_fill([10.0, 30_000.0], [1.01, 1.0], capacity, fairness)
    assert sum(shares) <= capacity * (1 + 1e-12) and shares[0] == 10.0
    grants = allocate(claims, capacity)
    assert [g.granted for g in grants] == [10, capacity - 10]
    # The same in units (a memory quota in MiB, one replica = 1 MiB here).
    units = allocate(claims, capacity, costs=[1, 1], unit="Mi")
    assert sum(g.granted for g in units) == capacity


def test_subnormal_weights_are_shared_by_their_ratio_not_overflowed() -> None:
    assert [g.granted for g in allocate([claim("a", "A", 10), claim("b", "B", 100, weight=1e-320)], 50)] == [10, 40]


def test_an_idle_workload_does_not_raise_its_tenants_weight() -> None:
    busy = [claim("a1", "A", 10), claim("b", "B", 10)]
    assert [g.granted for g in allocate(busy, 10)] == [5, 5]
    # a0 (weight 9) asks for nothing: tenant A's weight stays that of a1.
    with_idle = [claim("a0", "A", 0, weight=9.0), *busy]
    grants = allocate(with_idle, 10)
    assert [g.granted for g in grants] == [0, 5, 5]
    assert "weight 1)" in grants[1].why and "weight 5" not in grants[1].why


def test_a_cut_beyond_what_the_actuator_applies_is_held_and_the_pool_holds() -> None:
    """A workload that may step down by 1 a cycle cannot hand 4 replicas to another this cycle:
    the actuator would clamp its cut and apply the other's scale-up, and the pool would overflow."""
    from actuator.base import LiveObject
    from actuator.safety import SafetyConfig, check

    big = service_policy("a", tenant="ta", maxStepDown=1)
    small = service_policy("b", tenant="tb")
    now_at = {big.workload: 10, small.workload: 2}
    state = ClusterState(
        {r: WorkloadState(r, n, n, observed_demand=5, observed_at=NOW - 10) for r, n in now_at.items()}
    )
    forecasts = {r: flat_forecast(r, NOW, 100.0) for r in now_at}  # each wants 10
    applied = {}
    for _ in range(6):  # cycle by cycle, as the actuator applies them
        p = plan(forecasts, state, [big, small], NOW, capacity={CLUSTER: 12})
        for a, pol in zip(p.actions, [big, small], strict=True):
            assert isinstance(a, ScaleTo)
            live = LiveObject(a.workload.key, "spec.replicas", a.from_replicas, "1")
            verdict = check(a, live, pol, NOW, NOW, SafetyConfig())
            applied[a.workload.name] = verdict.value if verdict.decision == "apply" else a.from_replicas
            if a.workload.name == "a" and applied["a"] > 6:
                assert "held at" in a.reason.message
        assert sum(applied.values()) <= 12, applied
        state = ClusterState(
            {
                r: WorkloadState(r, n, n, observed_demand=5, observed_at=NOW - 10)
                for r, n in ((r, applied[r.name]) for r in now_at)
            }
        )
    assert applied == {"a": 6, "b": 6}, "stepped down to the fair shares"


def test_minreplicas_are_kept_even_when_they_do_not_fit_and_the_reason_says_so() -> None:
    one = service_policy("a", tenant="ta", minReplicas=8)
    two = service_policy("b", tenant="tb", minReplicas=8)
    state = ClusterState(
        {p.workload: WorkloadState(p.workload, 8, 8, observed_demand=5, observed_at=NOW - 10) for p in (one, two)}
    )
    p = plan({r: flat_forecast(r, NOW, 100.0) for r in state.workloads}, state, [one, two], NOW, capacity={CLUSTER: 10})
    assert [a.to_replicas for a in p.actions if isinstance(a, ScaleTo)] == [8, 8]
    assert all("held at 8" in a.reason.message for a in p.actions)
    assert all(
        a.reason.message.endswith(
            "cluster capacity 10 is exceeded by 6 this cycle: what the held workloads must keep does not fit"
        )
        for a in p.actions
    ), p.actions[0].reason.message


def test_counts_far_above_a_new_capacity_step_down_and_the_overrun_is_said() -> None:
    """minReplicas 0, but 10 running each under a new capacity of 12 with maxStepDown 2: each must
    keep 8 this cycle, 16 in all, more than the 12 (the audit saw no word of it)."""
    pols = [service_policy(n, tenant=f"t{n}", maxStepDown=2) for n in ("a", "b")]
    state = ClusterState(
        {p.workload: WorkloadState(p.workload, 10, 10, observed_demand=5, observed_at=NOW - 10) for p in pols}
    )
    p = plan({r: flat_forecast(r, NOW, 100.0) for r in state.workloads}, state, pols, NOW, capacity={CLUSTER: 12})
    assert [a.to_replicas for a in p.actions if isinstance(a, ScaleTo)] == [8, 8]
    assert all("is exceeded by 4 this cycle" in a.reason.message for a in p.actions), p.actions[0].reason.message


def test_a_scoped_quota_that_alone_is_short_cuts_the_workloads_it_selects() -> None:
    # The namespace's 30 pods hold both; the scoped quota shop/high (4 pods) selects checkout only.
    # Only the scoped pool is short: the planner's quick "is anything short?" check must see it.
    gold = service_policy("checkout", tenant="gold")
    bronze = service_policy("search", tenant="bronze")
    refs = [gold.workload, bronze.workload]
    state = ClusterState(
        {r: WorkloadState(r, 2, 2, observed_demand=5, observed_at=NOW - 10) for r in refs},
        pod_quotas={"shop": 30, "shop/high": 4},
        quota_members={"shop/high": frozenset({gold.workload})},
    )
    p = plan({r: flat_forecast(r, NOW, 100.0) for r in refs}, state, [gold, bronze], NOW)
    assert [a.to_replicas for a in p.actions if isinstance(a, ScaleTo)] == [4, 10]
    assert any("quota shop/high on pods" in n for n in p.notes)


def test_a_reshared_plan_notes_each_pool_once_with_what_was_asked() -> None:
    def c(ns: str, name: str, tenant: str, want: int, priority: int = 0) -> Claim:
        return Claim(WorkloadRef("Deployment", ns, name), tenant, priority, 1.0, want)

    claims = [c("ns1", "w1", "T", 10, priority=5), c("ns2", "w2", "T", 10), c("ns3", "u", "U", 10)]
    grants, notes = allocate_pools(claims, {"T": 10, CLUSTER: 9}, namespace_pods={"ns1": 3})
    assert [g.granted for g in grants] == [3, 3, 3]
    assert len(notes) == 3, notes  # ns1's pod quota, tenant T's quota, the cluster: once each
    cluster = [n for n in notes if n.startswith("cluster capacity")]
    assert cluster == ["cluster capacity 9 is short of the 20 replicas wanted; got/wanted by tenant: T 6/20, U 3/10"]
    assert any(n.startswith("tenant T quota 10 is short of the 20 replicas") for n in notes)


def _busy_and_idle() -> tuple[list, ClusterState, dict]:  # type: ignore[type-arg]
    """A serves 80 req/s now on 8 replicas of 10 req/s; B is idle on 1, with 80 req/s forecast."""
    a, b = service_policy("a", tenant="ta"), service_policy("b", tenant="tb")
    st_ = ClusterState(
        workloads={
            a.workload: WorkloadState(a.workload, 8, 8, observed_demand=80.0, observed_at=NOW),
            b.workload: WorkloadState(b.workload, 1, 1, observed_demand=0.0, observed_at=NOW),
        }
    )
    forecasts = {a.workload: flat_forecast(a.workload, NOW, 80.0), b.workload: flat_forecast(b.workload, NOW, 80.0)}
    return [a, b], st_, forecasts


def test_another_workloads_forecast_does_not_take_replicas_a_service_needs_now() -> None:
    """Found by a review (2026-12-07): the floor under shortage was minReplicas alone, so B's
    forecast of demand to come took 3 of the 8 replicas A's observed 80 req/s needs now."""
    policies, state, forecasts = _busy_and_idle()
    p = plan(forecasts, state, policies, NOW, capacity={CLUSTER: 9})
    a, b = (x for x in p.actions if isinstance(x, ScaleTo))
    assert (a.to_replicas, b.to_replicas) == (8, 1), p.actions
    assert "the floors of every workload (served first: minReplicas, and what demand observed now needs)" in (
        b.reason.message
    )


def test_a_merged_plans_floors_are_read_from_its_reasons() -> None:
    """``share_capacity`` (plans made in parts, ``plan --prometheus``) reads the reactive need from
    each decision's reason, and gives the same grants as ``plan(..., capacity=...)``."""
    from planner import share_capacity

    policies, state, forecasts = _busy_and_idle()
    merged = share_capacity(plan(forecasts, state, policies, NOW), policies, {CLUSTER: 9})
    assert [x.to_replicas for x in merged.actions if isinstance(x, ScaleTo)] == [8, 1]


def test_when_the_floors_alone_do_not_fit_priority_cuts_what_a_service_needs_now() -> None:
    a, b = service_policy("a", tenant="ta"), service_policy("b", tenant="tb", priority=1)
    state = ClusterState(
        workloads={
            a.workload: WorkloadState(a.workload, 8, 8, observed_demand=80.0, observed_at=NOW),
            b.workload: WorkloadState(b.workload, 6, 6, observed_demand=60.0, observed_at=NOW),
        }
    )
    forecasts = {a.workload: flat_forecast(a.workload, NOW, 80.0), b.workload: flat_forecast(b.workload, NOW, 60.0)}
    p = plan(forecasts, state, [a, b], NOW, capacity={CLUSTER: 10})
    got = [x.to_replicas for x in p.actions if isinstance(x, ScaleTo)]
    assert got == [4, 6], p.actions  # b's higher priority keeps its need; a gives up 4 (its maxStepDown allows)
    (cut,) = [x for x in p.actions if isinstance(x, ScaleTo) and x.workload == a.workload]
    assert "even its floor did not fit" in cut.reason.message, cut.reason.message


def test_a_fallback_services_need_now_is_its_floor_in_a_merged_plan_too() -> None:
    """Found by a review: a fallback decision's reason said no reactive need, so ``share_capacity``
    (plans merged from parts) floored it at minReplicas while ``plan(capacity=)`` protected it."""
    from planner import share_capacity

    policies, state, forecasts = _busy_and_idle()
    a = policies[0].workload
    without_a = {ref: fc for ref, fc in forecasts.items() if ref != a}  # a has no forecast: fallback
    direct = plan(without_a, state, policies, NOW, capacity={CLUSTER: 9})
    merged = share_capacity(plan(without_a, state, policies, NOW), policies, {CLUSTER: 9})
    for p in (direct, merged):
        assert [x.to_replicas for x in p.actions if isinstance(x, ScaleTo)] == [8, 1], p.actions


def test_a_huge_observed_demand_does_not_wrap_the_floor_around() -> None:
    """Found by a review: 1e30 req/s made the batch's need int64's minimum, and the floor minReplicas."""
    policies, state, forecasts = _busy_and_idle()
    a, b = (p.workload for p in policies)
    other = service_policy("c", tenant="tc")  # a third service: the batch path, not the single one
    huge = ClusterState(
        workloads={
            **state.workloads,
            a: WorkloadState(a, 8, 8, observed_demand=1e30, observed_at=NOW),
            other.workload: WorkloadState(other.workload, 0, 0, observed_demand=0.0, observed_at=NOW),
        }
    )
    p = plan(forecasts, huge, [*policies, other], NOW, capacity={CLUSTER: 10})  # c's minReplicas takes 1
    assert [x.to_replicas for x in p.actions if isinstance(x, ScaleTo)] == [8, 1, 1], p.actions
