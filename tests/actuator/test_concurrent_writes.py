"""A plan's API requests in flight at once (``actuation.concurrent_writes``), against the emulated API
server through the official client: one slow namespace no longer makes the rest of the plan stale,
the most urgent actions still go first, one namespace's actions stay in order (its quota room is
taken by each scale-up before the next is checked), and a crash in the middle leaves nothing that
reconciliation cannot settle."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from kubeemu import DEPLOYMENTS, QUOTAS, Fault, deployment, policy

from actuator.applying import Actuator, parse_intent
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")


@pytest.fixture
def store(db_url):  # type: ignore[no-untyped-def]
    """On SQLite and on PostgreSQL, whose journal transactions are group commits written outside the
    actuator's lock (``Actuator._commit``)."""
    s = Store(db_url)
    yield s
    s.close()


def ref(ns: str, name: str) -> WorkloadRef:
    return WorkloadRef("Deployment", ns, name)


def pol(ns: str, name: str, priority: int = 0):  # type: ignore[no-untyped-def]
    body = policy(name).model_dump(by_alias=True, exclude_none=True)
    body["spec"]["target"]["namespace"] = ns
    body["spec"]["priority"] = priority
    return type(policy()).model_validate(body)


def put(kube, ns: str, name: str, replicas: int = 2) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(DEPLOYMENTS, ns, name, deployment(replicas, labels={"app": name}))


def replicas(kube, ns: str, name: str) -> int:  # type: ignore[no-untyped-def]
    return int(kube.cluster.get(DEPLOYMENTS, ns, name)["spec"]["replicas"])


def actuator(kube, pols, store=None, **cfg) -> Actuator:  # type: ignore[no-untyped-def]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    return Actuator(target, store, pols, SafetyConfig(**cfg), clock=time.time)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_slow_namespace_does_not_make_the_rest_of_the_plan_too_old(kube, workers: int) -> None:  # type: ignore[no-untyped-def]
    """Namespace a's write takes 3.5 s, longer than maxPlanAge 2.5 s. One at a time, b's and c's scale-ups
    were checked after it and skipped as too old; with 3 in flight they are written while a's waits.
    (The margins are wide and the plan is made after the actuator: with 1 s against 1.5 s, a slow CI
    machine once took more than 1 s to check the first action.)"""
    names = [("a", "x"), ("b", "y"), ("c", "z")]
    for ns, name in names:
        put(kube, ns, name)
    kube.cluster.faults.append(Fault("PATCH", "/namespaces/a/deployments/x/scale", delay_s=3.5, after=True))
    pols = [pol(*k) for k in names]
    act = actuator(kube, pols, max_plan_age_s=2.5, concurrent_writes=workers)
    plan = Plan(time.time(), tuple(ScaleTo(ref(*k), 2, 4, R) for k in names))
    results = act.apply_plan(plan, plan.created_at)
    outcomes = [r.outcome for r in results]
    if workers == 1:
        assert outcomes == ["applied", "skipped", "skipped"], results
        assert "older than maxPlanAge" in results[1].detail
    else:
        assert outcomes == ["applied"] * 3, results
        assert [replicas(kube, *k) for k in names] == [4, 4, 4]


def test_the_most_urgent_actions_go_first_when_the_plan_runs_out_of_time(kube) -> None:  # type: ignore[no-untyped-def]
    """Two in flight: the two scale-ups (in c and b, listed after the scale-down in a) are started first;
    both are slow (3.5 s against maxPlanAge 2.5 s), so the scale-down in a, started after them, is
    skipped as too old (started in the plan's order instead, the scale-down would have been written and
    a scale-up skipped)."""
    put(kube, "a", "down", replicas=5)
    put(kube, "b", "up1")
    put(kube, "c", "up2")
    for ns, name in (("b", "up1"), ("c", "up2")):
        kube.cluster.faults.append(
            Fault("PATCH", f"/namespaces/{ns}/deployments/{name}/scale", delay_s=3.5, after=True)
        )
    pols = [pol("a", "down"), pol("b", "up1"), pol("c", "up2", priority=5)]
    act = actuator(kube, pols, max_plan_age_s=2.5, concurrent_writes=2)
    plan = Plan(
        time.time(),
        (ScaleTo(ref("a", "down"), 5, 3, R), ScaleTo(ref("b", "up1"), 2, 4, R), ScaleTo(ref("c", "up2"), 2, 4, R)),
    )
    results = act.apply_plan(plan, plan.created_at)
    assert [r.outcome for r in results] == ["skipped", "applied", "applied"], results
    assert "older than maxPlanAge" in results[0].detail
    assert (replicas(kube, "a", "down"), replicas(kube, "b", "up1"), replicas(kube, "c", "up2")) == (5, 4, 4)


def pod_quota(used: int, hard: int) -> dict:
    return {"spec": {"hard": {"pods": str(hard)}}, "status": {"hard": {"pods": str(hard)}, "used": {"pods": str(used)}}}


def test_one_namespaces_scale_ups_still_share_its_quota_room_one_after_the_other(kube) -> None:  # type: ignore[no-untyped-def]
    """Four pods free in a: x takes three, y gets the one left, while b's scale-ups run beside them."""
    for name in ("x", "y"):
        put(kube, "a", name)
        put(kube, "b", name)
    kube.cluster.put(QUOTAS, "a", "q", pod_quota(used=6, hard=10))
    # a slow quota list in a: b's actions run meanwhile
    kube.cluster.faults.append(Fault("GET", "/namespaces/a/resourcequotas", delay_s=0.3))
    pols = [pol(ns, name) for ns in ("a", "b") for name in ("x", "y")]
    plan = Plan(time.time(), tuple(ScaleTo(ref(ns, name), 2, 5, R) for ns in ("a", "b") for name in ("x", "y")))
    results = actuator(kube, pols, concurrent_writes=4).apply_plan(plan, plan.created_at)
    assert [r.outcome for r in results] == ["applied"] * 4, results
    assert "pod quota (1 more pods allowed)" in results[1].detail, results[1].detail
    assert [replicas(kube, ns, name) for ns in ("a", "b") for name in ("x", "y")] == [5, 3, 5, 5]


def test_never_two_requests_of_one_namespace_in_flight_but_several_namespaces_at_once(kube) -> None:  # type: ignore[no-untyped-def]
    names = [(ns, f"w{i}") for ns in ("a", "b", "c") for i in range(4)]
    for k in names:
        put(kube, *k)
    pols = [pol(*k) for k in names]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    lock = threading.Lock()
    flying: dict[str, int] = {}
    most: dict[str, int] = {}
    # The first three requests wait for each other (not for a sleep's worth of time): all three
    # namespaces' first requests are in flight at once, however slowly the threads start.
    first_three = threading.Barrier(3, timeout=10)
    calls = [0]

    def tracked(fn):  # type: ignore[no-untyped-def]
        def call(action, *args):  # type: ignore[no-untyped-def]
            ns = action.workload.namespace
            with lock:
                flying[ns] = flying.get(ns, 0) + 1
                most[ns] = max(most.get(ns, 0), flying[ns])
                most["all"] = max(most.get("all", 0), sum(flying.values()))
                calls[0] += 1
                early = calls[0] <= 3
            try:
                if early:
                    with contextlib.suppress(threading.BrokenBarrierError):  # most["all"] tells
                        first_three.wait()
                time.sleep(0.05)  # a slow API server: the others start meanwhile if they may
                return fn(action, *args)
            finally:
                with lock:
                    flying[ns] -= 1

        return call

    target.live = tracked(target.live)  # type: ignore[method-assign]
    target.write = tracked(target.write)  # type: ignore[method-assign]
    plan = Plan(time.time(), tuple(ScaleTo(ref(*k), 2, 3, R) for k in names))
    results = Actuator(target, None, pols, SafetyConfig(concurrent_writes=8), clock=time.time).apply_plan(
        plan, plan.created_at
    )
    assert [r.outcome for r in results] == ["applied"] * len(names), results
    assert {ns: most[ns] for ns in ("a", "b", "c")} == {"a": 1, "b": 1, "c": 1}
    assert most["all"] == 3


def test_a_conflict_is_read_again_and_written_while_other_namespaces_go_on(kube, store) -> None:  # type: ignore[no-untyped-def]
    names = [(ns, f"w{i}") for ns in ("a", "b", "c") for i in range(3)]
    for k in names:
        put(kube, *k)
    kube.cluster.faults.append(Fault("PATCH", "/namespaces/b/deployments/w1/scale", status=409))
    pols = [pol(*k) for k in names]
    plan = Plan(time.time(), tuple(ScaleTo(ref(*k), 2, 3, R) for k in names))
    _, ids = store.record_plan(plan, source="actuator")
    act = actuator(kube, pols, store, concurrent_writes=3)
    results = act.apply_plan(plan, plan.created_at, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * len(names), results
    assert all(replicas(kube, *k) == 3 for k in names)
    states = {a.id: a.state for a in store.actions()}
    assert [states[i] for i in ids] == ["applied"] * len(names)
    assert act.unsettled == set()
    for k in names:  # every write's managed field was recorded with its outcome
        mf = store.managed_field(ref(*k).key)
        assert mf is not None and mf.written_value == 3, (k, mf)


class Crash(BaseException):
    """The process dies (nothing in the actuator catches it)."""


def test_a_crash_in_one_worker_stops_new_writes_and_reconciliation_settles_every_row(kube, store) -> None:  # type: ignore[no-untyped-def]
    names = [(ns, f"w{i}") for ns in ("a", "b", "c", "d") for i in range(4)]
    for k in names:
        put(kube, *k)
    pols = [pol(*k) for k in names]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    real_write = target.write
    written: list[str] = []

    def write(action, value, live):  # type: ignore[no-untyped-def]
        # the write-ahead intent of this action is committed before its own write
        mf = store.managed_field(action.target)
        assert mf is not None and parse_intent(mf.resource_version) == (value, live.resource_version), mf
        new = real_write(action, value, live)
        written.append(action.target)
        if len(written) == 5:
            raise Crash  # the 5th write landed, its answer never journaled
        return new

    target.write = write  # type: ignore[method-assign]
    plan = Plan(time.time(), tuple(ScaleTo(ref(*k), 2, 3, R) for k in names))
    _, ids = store.record_plan(plan, source="actuator")
    act = Actuator(target, store, pols, SafetyConfig(concurrent_writes=3), clock=time.time)
    with pytest.raises(Crash):
        act.apply_plan(plan, plan.created_at, action_ids=ids)
    landed = {ref(*k).key for k in names if replicas(kube, *k) == 3}
    # no new action started after it: the 5th and at most the two in flight beside it
    assert set(written) == landed and 5 <= len(landed) <= 7, (written, landed)
    target.write = real_write  # type: ignore[method-assign]
    Actuator(target, store, pols, SafetyConfig()).reconcile(time.time())
    states = {a.target: a.state for a in store.actions()}
    assert states == {ref(*k).key: ("applied" if ref(*k).key in landed else "skipped") for k in names}


def test_the_setting_reaches_the_daemons_actuator(kube, store) -> None:  # type: ignore[no-untyped-def]
    from scaleahead.clock import SystemClock
    from scaleahead.commands.run import cluster_actuation
    from scaleahead.settings import ActuationSettings, Settings

    assert ActuationSettings().concurrent_writes == 4
    with pytest.raises(ValueError, match="concurrent_writes"):
        ActuationSettings(concurrent_writes=0)
    settings = Settings.model_validate({"actuation": {"concurrent_writes": 7}})
    _, act, _ = cluster_actuation(kube.api_client(), store, [], settings, SystemClock(), "me")
    assert act.config.concurrent_writes == 7


def test_an_in_memory_journal_is_applied_from_one_thread(kube) -> None:  # type: ignore[no-untyped-def]
    """Each thread's connection to ``sqlite://`` is a database of its own: the workers would find no
    tables. Such a store applies the plan one action at a time, and journals it."""
    mem = Store("sqlite://")
    assert not mem.shared_by_threads
    names = [(ns, "w") for ns in ("a", "b", "c")]
    for k in names:
        put(kube, *k)
    pols = [pol(*k) for k in names]
    plan = Plan(time.time(), tuple(ScaleTo(ref(*k), 2, 3, R) for k in names))
    _, ids = mem.record_plan(plan, source="actuator")
    results = actuator(kube, pols, mem, concurrent_writes=4).apply_plan(plan, plan.created_at, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * 3, results
    assert {a.state for a in mem.actions()} == {"applied"}
    mem.close()


def test_a_file_store_is_shared_by_threads(store) -> None:  # type: ignore[no-untyped-def]
    assert store.shared_by_threads


def _started(target, log):  # type: ignore[no-untyped-def]
    real = target.live

    def live(action, *args):  # type: ignore[no-untyped-def]
        log.append(action)
        time.sleep(0.005)  # the other workers start meanwhile if they may
        return real(action, *args)

    target.live = live


def test_no_less_urgent_action_starts_while_a_more_urgent_one_waits(kube) -> None:  # type: ignore[no-untyped-def]
    """Ten scale-ups in a (one at a time there) and scale-downs in b, c, d, with 4 in flight: every
    scale-up starts before any scale-down (a review found the other namespaces' scale-downs taking
    the free slots, and a's scale-ups skipped as too old while they were written). Among the
    scale-ups, the higher priority ones (in e) start first."""
    ups = [("a", f"u{i}") for i in range(10)]
    urgent = [("e", f"p{i}") for i in range(2)]
    downs = [(ns, f"d{i}") for ns in ("b", "c", "d") for i in range(4)]
    for k in ups + urgent:
        put(kube, *k)
    for k in downs:
        put(kube, *k, replicas=5)
    pols = [pol(*k) for k in ups + downs] + [pol(*k, priority=5) for k in urgent]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    started: list = []
    _started(target, started)
    plan = Plan(
        time.time(),
        tuple(ScaleTo(ref(*k), 5, 3, R) for k in downs) + tuple(ScaleTo(ref(*k), 2, 4, R) for k in ups + urgent),
    )
    act = Actuator(target, None, pols, SafetyConfig(concurrent_writes=4), clock=time.time)
    results = act.apply_plan(plan, plan.created_at)
    assert {r.outcome for r in results} == {"applied"}, results
    kinds = ["down" if a.to_replicas < a.from_replicas else "up" for a in started]
    assert kinds == ["up"] * 12 + ["down"] * 12, kinds
    assert {a.workload.namespace for a in started[:2]} == {"e"}  # priority 5 first
    # the scale-downs of b, c and d still overlap with each other
    assert [replicas(kube, *k) for k in downs] == [3] * len(downs)


def test_a_human_edits_field_manager_read_lets_other_namespaces_go_on(kube, store) -> None:  # type: ignore[no-untyped-def]
    """Finding who edited a field is one more GET: made with the lock released like any request."""
    put(kube, "a", "x")
    put(kube, "b", "y")
    pols = [pol("a", "x"), pol("b", "y")]
    act = actuator(kube, pols, store, concurrent_writes=2)
    first = Plan(time.time(), (ScaleTo(ref("a", "x"), 2, 3, R), ScaleTo(ref("b", "y"), 2, 3, R)))
    assert {r.outcome for r in act.apply_plan(first, first.created_at)} == {"applied"}
    put(kube, "a", "x", replicas=7)  # someone else's edit of the field scaleahead wrote
    events: list[str] = []
    target = act.target
    real_fm, real_write, real_live = target.field_manager, target.write, target.live  # type: ignore[attr-defined]
    # Events, not sleeps (a 0.1 s delay on b's read and a 0.3 s sleep once let a stalled run write b
    # too late): b's read returns only once a is asking who edited x, so b then needs the lock to check
    # and write, and a's question waits for b's write, which cannot come while a holds the lock.
    asking, b_wrote = threading.Event(), threading.Event()

    def field_manager(action):  # type: ignore[no-untyped-def]
        events.append("who edited: start")
        asking.set()
        b_wrote.wait(10)  # not asserted here (the actuator would take the error for the action's)
        events.append("who edited: end")
        return real_fm(action)

    def read(action, *args):  # type: ignore[no-untyped-def]
        got = real_live(action, *args)
        if action.workload.namespace == "b":
            asking.wait(10)  # (if never set, "who edited: start" is missing from the events below)
        return got

    def write(action, value, live):  # type: ignore[no-untyped-def]
        events.append(f"write {action.workload.namespace}")
        try:
            return real_write(action, value, live)
        finally:
            if action.workload.namespace == "b":
                b_wrote.set()

    target.field_manager = field_manager  # type: ignore[attr-defined]
    target.live = read  # type: ignore[method-assign]
    target.write = write  # type: ignore[method-assign]
    second = Plan(time.time(), (ScaleTo(ref("a", "x"), 7, 4, R), ScaleTo(ref("b", "y"), 3, 4, R)))
    results = act.apply_plan(second, second.created_at)
    assert results[0].outcome == "skipped" and "edit" in results[0].detail, results[0]
    assert results[1].outcome == "applied", results[1]
    assert events == ["who edited: start", "write b", "who edited: end"], events


@pytest.mark.parametrize("extra", ["none", "noop", "held"])
def test_an_action_without_a_request_does_not_hold_back_less_urgent_ones(kube, extra: str) -> None:  # type: ignore[no-untyped-def]
    """a: a scale-up whose write takes 3.5 s, then a no-op or a held (backing-off) workload's scale-up,
    neither of which makes a request; b: a scale-down. maxPlanAge 2.5 s, 2 in flight: b's scale-down is
    written beside a's write (a review found the quiet action, waiting behind a's write in its lane,
    holding the scale-down back until the plan was too old)."""
    put(kube, "a", "up")
    put(kube, "a", "x")
    put(kube, "b", "down", replicas=5)
    kube.cluster.faults.append(Fault("PATCH", "/namespaces/a/deployments/up/scale", delay_s=3.5, after=True))
    pols = [pol("a", "up"), pol("a", "x"), pol("b", "down")]
    actions = [ScaleTo(ref("a", "up"), 2, 4, R)]
    if extra == "noop":
        actions.append(ScaleTo(ref("a", "x"), 2, 2, R))
    elif extra == "held":
        actions.append(ScaleTo(ref("a", "x"), 2, 4, R))
    actions.append(ScaleTo(ref("b", "down"), 5, 3, R))
    act = actuator(kube, pols, max_plan_age_s=2.5, concurrent_writes=2)
    if extra == "held":
        act.held = frozenset({ref("a", "x").key})
    plan = Plan(time.time(), tuple(actions))
    results = act.apply_plan(plan, plan.created_at)
    assert results[0].outcome == "applied" and results[-1].outcome == "applied", results
    if extra != "none":
        assert results[1].outcome == "skipped" and results[1].detail in ("no change", "backing off after errors")
    assert (replicas(kube, "a", "up"), replicas(kube, "a", "x"), replicas(kube, "b", "down")) == (4, 2, 3)


@pytest.mark.parametrize("workers", [1, 4])
def test_reconcile_reads_the_next_rows_objects_at_once_and_decides_them_in_order(kube, store, workers: int) -> None:  # type: ignore[no-untyped-def]
    """After a crash, 12 rows left planned in 3 namespaces: with ``concurrent_writes`` 4 the objects
    of the next 4 rows are read at once (one at a time until 2026-12-06), and every row is decided
    as one at a time decides it, in the same order: a landed write applied, the others skipped."""
    names = [(ns, f"w{i}") for ns in "abc" for i in range(4)]
    for ns, name in names:
        put(kube, ns, name)
    pols = [pol(ns, name) for ns, name in names]
    act = actuator(kube, pols, store, concurrent_writes=workers)
    plan = Plan(time.time(), tuple(ScaleTo(ref(ns, name), 2, 3, R) for ns, name in names))
    _, ids = store.record_plan(plan, source="loop", state="planned")
    # the crash came after b/w1's intent and write: its write landed
    act_one = actuator(kube, pols, store)
    assert act_one._apply_one(plan.actions[5], plan.created_at, time.time(), False).outcome == "applied"
    store.set_action_state(ids[5], "planned", "", plan.created_at)  # (as if its outcome never came)
    in_flight, most, calls = [0], [0], [0]
    lock = threading.Lock()
    real_live = act.target.live
    # The first reads wait for each other, up to ``workers`` of them (not for a sleep's worth of
    # time): as many as may be read at once are in flight together, however slowly the threads start.
    first_reads = threading.Barrier(workers, timeout=10)

    def live(action, quota_room=True):  # type: ignore[no-untyped-def]
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            calls[0] += 1
            early = calls[0] <= workers
        try:
            if early:
                with contextlib.suppress(threading.BrokenBarrierError):  # most[0] tells
                    first_reads.wait()
            time.sleep(0.05)
            return real_live(action, quota_room)
        finally:
            with lock:
                in_flight[0] -= 1

    act.target.live = live  # type: ignore[method-assign]
    done = act.reconcile(time.time())
    assert most[0] == workers, most[0]
    assert [aid for aid, _, _ in done] == sorted(ids, reverse=True)  # newest first, as one at a time
    states = {aid: state for aid, state, _ in done}
    assert states == {aid: ("applied" if aid == ids[5] else "skipped") for aid in ids}
    assert store.actions(state="planned") == []
