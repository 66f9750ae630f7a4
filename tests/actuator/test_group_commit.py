"""Group commit of the journal (``Actuator._commit``) when a plan's writes are in flight at once on
PostgreSQL: each journal transaction is written with the actuator's lock released, and the intents
that arrive meanwhile go together in the next one. The journal's invariant still holds (an action's
write-ahead intent is committed before its write); a failed transaction fails each write it held and
loses no earlier outcome. SQLite keeps one transaction per write, under the lock."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubeemu import DEPLOYMENTS, deployment, policy
from sqlalchemy.exc import OperationalError

from actuator.applying import Actuator, parse_intent
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NAMES = [(ns, f"w{i}") for ns in ("a", "b", "c", "d") for i in range(4)]


@pytest.fixture
def store(db_url: str) -> Any:
    s = Store(db_url)
    yield s
    s.close()


def pol(ns: str, name: str) -> Any:
    body = policy(name).model_dump(by_alias=True, exclude_none=True)
    body["spec"]["target"]["namespace"] = ns
    return type(policy()).model_validate(body)


def replicas(kube: Any, ns: str, name: str) -> int:
    return int(kube.cluster.get(DEPLOYMENTS, ns, name)["spec"]["replicas"])


class Journal:
    """``store.journal`` slowed down (a database far away) and watched: the intents of each call.
    With ``hold_first``, the first call with an intent also waits for that event (``two_queued``)."""

    def __init__(
        self, store: Store, delay_s: float, fail_first_group: bool = False, hold_first: threading.Event | None = None
    ) -> None:
        self.store, self.real, self.delay_s = store, store.journal, delay_s
        self.fail_first_group, self.hold_first = fail_first_group, hold_first
        self.calls: list[list[str]] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        store.journal = self  # type: ignore[method-assign]

    def __call__(self, outcomes: Any, fields: Any, now: float) -> None:
        intents = [w.target for w in fields if parse_intent(w.resource_version) is not None]
        time.sleep(self.delay_s)
        hold, self.hold_first = (self.hold_first, None) if intents else (None, self.hold_first)
        if hold is not None:
            hold.wait(10)  # (not asserted: the calls and transactions below tell)
        with self._lock:
            self.calls.append(intents)
            fail = self.fail_first_group and len(intents) >= 2 and not self.failed
            if fail:
                self.failed = intents
        if fail:
            raise OperationalError("UPDATE managed_fields ...", {}, Exception("server closed the connection"))
        self.real(outcomes, fields, now)


def setup(kube: Any, store: Store) -> tuple[KubernetesTarget, list[Any], Plan, list[int], list[str]]:
    for ns, name in NAMES:
        kube.cluster.put(DEPLOYMENTS, ns, name, deployment(2, labels={"app": name}))
    pols = [pol(*k) for k in NAMES]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    real_write = target.write
    written: list[str] = []

    def write(action: Any, value: int, live: Any) -> Any:
        # the write-ahead intent of this action is committed (another connection sees it) before its write
        mf = store.managed_field(action.target)
        assert mf is not None and parse_intent(mf.resource_version) == (value, live.resource_version), mf
        written.append(action.target)
        return real_write(action, value, live)

    target.write = write  # type: ignore[method-assign]
    plan = Plan(time.time(), tuple(ScaleTo(WorkloadRef("Deployment", ns, n), 2, 3, R) for ns, n in NAMES))
    _, ids = store.record_plan(plan, source="actuator")
    return target, pols, plan, list(ids), written


def two_queued(act: Actuator) -> threading.Event:
    """Set as a third write-ahead intent is handed to the journal: the first transaction held until
    then (``Journal.hold_first``) ends with two intents queued behind it, which go in the next one
    together (a 0.05 s transaction alone counted on the other workers getting there meanwhile,
    which a stalled machine need not do). The intent is queued before the held transaction can
    end: that needs the lock, which the worker handing it over holds until it waits."""
    queued, real, lock, seen = threading.Event(), act._commit, threading.Lock(), [0]

    def commit(intent: Any = None) -> None:
        if intent is not None:
            with lock:
                seen[0] += 1
                if seen[0] == 3:
                    queued.set()
        real(intent)

    act._commit = commit  # type: ignore[method-assign]
    return queued


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_intents_that_arrive_while_a_transaction_is_in_flight_are_committed_together(kube: Any, store: Store) -> None:
    target, pols, plan, ids, written = setup(kube, store)
    act = Actuator(target, store, pols, SafetyConfig(concurrent_writes=4), clock=time.time)
    journal = Journal(store, delay_s=0.05, hold_first=two_queued(act))
    results = act.apply_plan(plan, plan.created_at, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * len(NAMES), results
    assert sorted(written) == sorted(WorkloadRef("Deployment", *k).key for k in NAMES)
    # 16 writes, and fewer transactions: the intents of several workers went in one
    grouped = [c for c in journal.calls if len(c) >= 2]
    assert grouped, journal.calls
    assert act.journal_transactions == len(journal.calls) < len(NAMES)
    assert sorted(t for c in journal.calls for t in c) == sorted(written)  # each intent exactly once
    states = {a.id: a.state for a in store.actions()}
    assert [states[i] for i in ids] == ["applied"] * len(NAMES) and act.unsettled == set()
    for ns, name in NAMES:
        mf = store.managed_field(WorkloadRef("Deployment", ns, name).key)
        assert mf is not None and mf.written_value == 3 and parse_intent(mf.resource_version) is None, mf
        assert replicas(kube, ns, name) == 3


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_failed_transaction_fails_each_write_it_held_and_keeps_the_outcomes_before_it(
    kube: Any, store: Store
) -> None:
    target, pols, plan, ids, written = setup(kube, store)
    act = Actuator(target, store, pols, SafetyConfig(concurrent_writes=4), clock=time.time)
    journal = Journal(store, delay_s=0.05, fail_first_group=True, hold_first=two_queued(act))
    results = act.apply_plan(plan, plan.created_at, action_ids=ids)
    lost = set(journal.failed)
    assert len(lost) >= 2, journal.calls
    by_target = {r.action.target: r for r in results}
    for key, res in by_target.items():
        if key in lost:  # its intent was not committed: its write was not made
            assert res.outcome == "failed" and "OperationalError" in res.detail, res
            assert key not in written
        else:
            assert res.outcome == "applied", res
    for ns, name in NAMES:
        key = WorkloadRef("Deployment", ns, name).key
        assert replicas(kube, ns, name) == (2 if key in lost else 3)
    # every row has its outcome: the ones committed before the failure, the failed transaction's
    # outcomes in a later one, the failed writes as failed
    states = {a.target: a.state for a in store.actions()}
    assert states == {key: ("failed" if key in lost else "applied") for key in by_target}
    assert act.unsettled == set()


def test_sqlite_writes_one_intent_a_transaction(kube: Any, tmp_path: Any) -> None:
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    try:
        assert not store.overlapping_writes
        target, pols, plan, ids, written = setup(kube, store)
        journal = Journal(store, delay_s=0.01)
        act = Actuator(target, store, pols, SafetyConfig(concurrent_writes=4), clock=time.time)
        results = act.apply_plan(plan, plan.created_at, action_ids=ids)
        assert [r.outcome for r in results] == ["applied"] * len(NAMES), results
        # under the lock, one transaction per write's intent, and the plan's last outcomes at its end
        assert [len(c) for c in journal.calls] == [1] * len(NAMES) + [0]
        assert act.journal_transactions == len(NAMES) + 1
    finally:
        store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_read_that_waited_for_another_workers_failed_transaction_commits_what_it_needs_and_goes_on(
    kube: Any, store: Store
) -> None:
    """a/x's second action reads a/x's record (``_managed``) while b/y's transaction, which also took
    a/x's confirmed record of its first action, is in flight and fails. The failure is b/y's: a/x's
    record is pending again and committed by the read's own transaction, and a/x's action goes on
    (an audit found it failed on b/y's error)."""
    names = [("a", "x"), ("b", "y")]
    for ns, name in names:
        kube.cluster.put(DEPLOYMENTS, ns, name, deployment(2, labels={"app": name}))
    pols = [pol(*k) for k in names]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=10.0)
    real_live, real_journal = target.live, store.journal
    # Events, not sleeps of 0.2 s and 0.3 s (a stalled run could take the steps in another order):
    # a/x's first action is done before b/y's intent is queued, and b/y's transaction fails only once
    # a/x's read is waiting for it.
    x_first_done, by_in_flight, x_waiting = threading.Event(), threading.Event(), threading.Event()
    reads: dict[str, int] = {}

    def live(action: Any, *args: Any) -> Any:
        reads[action.target] = reads.get(action.target, 0) + 1
        if action.target == "Deployment/b/y":
            # once a/x's second action reads: its first is done, its outcome and confirmed record pending
            assert x_first_done.wait(10)
        if action.target == "Deployment/a/x" and reads[action.target] == 2:
            x_first_done.set()
            assert by_in_flight.wait(10)  # the second action goes on once b/y's transaction is in flight
        return real_live(action, *args)

    def journal(outcomes: Any, fields: Any, now: float) -> None:
        if any(w.target == "Deployment/b/y" and parse_intent(w.resource_version) for w in fields):
            by_in_flight.set()
            # a/x's read now waits for this transaction (it cannot end before: it needs the lock)
            assert x_waiting.wait(10), "a/x's read did not wait for b/y's transaction"
            raise OperationalError("INSERT INTO managed_fields ...", {}, Exception("server closed the connection"))
        real_journal(outcomes, fields, now)

    target.live = live  # type: ignore[method-assign]
    store.journal = journal  # type: ignore[method-assign]
    x, y = WorkloadRef("Deployment", "a", "x"), WorkloadRef("Deployment", "b", "y")
    plan = Plan(time.time(), (ScaleTo(x, 2, 3, R), ScaleTo(x, 3, 4, R), ScaleTo(y, 2, 3, R)))
    _, ids = store.record_plan(plan, source="actuator")
    act = Actuator(target, store, pols, SafetyConfig(concurrent_writes=2), clock=time.time)
    real_commit = act._commit

    def commit(intent: Any = None) -> None:
        if intent is None and by_in_flight.is_set():  # a/x's read of its record, from its second action
            x_waiting.set()
        real_commit(intent)

    act._commit = commit  # type: ignore[method-assign]
    results = act.apply_plan(plan, plan.created_at, action_ids=ids)
    assert by_in_flight.is_set() and x_waiting.is_set()
    assert [r.outcome for r in results] == ["applied", "applied", "failed"], results
    assert "OperationalError" in results[2].detail
    assert (replicas(kube, "a", "x"), replicas(kube, "b", "y")) == (4, 2)
    assert [a.state for a in sorted(store.actions(), key=lambda a: a.id)] == ["applied", "applied", "failed"]
    mf = store.managed_field(x.key)
    assert mf is not None and mf.written_value == 4 and act.unsettled == set()
