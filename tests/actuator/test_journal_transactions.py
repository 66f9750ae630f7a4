"""The journal's transactions per action (scale audit F6) and the invariant that makes fewer of them safe:
an action's write-ahead intent commits before its API write, with the outcomes of the actions before it."""

from __future__ import annotations

import pytest
from kubeemu import DEPLOYMENTS, HPAS, deployment, policy
from sqlalchemy import event

from actuator.applying import Actuator, parse_intent
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
N = 12


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def names() -> list[str]:
    return [f"w{i}" for i in range(N)]


def setup(kube) -> tuple[KubernetesTarget, list]:
    pols = [policy(n) for n in names()]
    for n in names():
        kube.cluster.put(DEPLOYMENTS, "default", n, deployment(2))
    return KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), pols


def plan() -> Plan:
    return Plan(NOW, tuple(ScaleTo(WorkloadRef("Deployment", "default", n), 2, 3, R) for n in names()))


def commits(store: Store) -> list[int]:
    count = [0]

    @event.listens_for(store.engine, "commit")
    def _commit(_conn) -> None:
        count[0] += 1

    return count


def test_one_transaction_per_write_plus_two_per_plan(kube, store):
    target, pols = setup(kube)
    p = plan()
    _, ids = store.record_plan(p, source="actuator")
    count = commits(store)
    results = Actuator(target, store, pols, SafetyConfig()).apply_plan(p, NOW, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * N
    # the managed fields read up front (1), one intent per write, which carries the outcomes of the
    # actions before it (N), the last outcome at the end (1); until 2026-12-06: 4 per action (4 N)
    assert count[0] == N + 2
    assert {a.state for a in store.actions()} == {"applied"}
    assert all(store.managed_field(f"Deployment/default/{n}").written_value == 3 for n in names())  # type: ignore[union-attr]


def test_mode_floor_also_costs_one_transaction_per_write(kube, store):
    # mode floor writes the HPA's minReplicas: its managed field is keyed by the HPA, and the read up
    # front must be too (until 2026-12-06 it was keyed by the Deployment, so every floor action missed
    # it and paid a commit and a read of its own: about 3 transactions per write)
    pols = [policy(n, mode="floor", hpa=f"{n}-hpa") for n in names()]
    for n in names():
        kube.cluster.put(DEPLOYMENTS, "default", n, deployment(2))
        kube.cluster.put(HPAS, "default", f"{n}-hpa", {"spec": {"minReplicas": 2, "maxReplicas": 10}})
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    p = plan()
    _, ids = store.record_plan(p, source="actuator")
    count = commits(store)
    results = Actuator(target, store, pols, SafetyConfig()).apply_plan(p, NOW, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * N, [r.detail for r in results]
    assert count[0] == N + 2
    assert {a.state for a in store.actions()} == {"applied"}
    for n in names():
        assert store.managed_field(f"HorizontalPodAutoscaler/default/{n}-hpa").written_value == 3  # type: ignore[union-attr]
        assert kube.cluster.get(HPAS, "default", f"{n}-hpa")["spec"]["minReplicas"] == 3  # type: ignore[index]


def test_skipped_actions_cost_no_transaction_of_their_own(kube, store):
    target, pols = setup(kube)
    p = plan()
    _, ids = store.record_plan(p, source="actuator")
    count = commits(store)
    # the plan is too old for every action: no write, so all outcomes go in one transaction
    results = Actuator(target, store, pols, SafetyConfig(max_plan_age_s=30.0)).apply_plan(p, NOW + 60, action_ids=ids)
    assert {r.outcome for r in results} == {"skipped"}
    assert count[0] == 2  # the managed fields read, the outcomes
    assert {a.state for a in store.actions()} == {"skipped"}
    assert kube.cluster.writes() == []


class Crash(BaseException):
    """The process dies (nothing in the actuator catches it)."""


def test_each_outcome_is_durable_before_the_next_write_and_a_crash_leaves_the_rest_planned(kube, store):
    target, pols = setup(kube)
    p = plan()
    _, ids = store.record_plan(p, source="actuator")
    real_write = target.write
    written: list[str] = []

    def write(action, value, live):
        # before each write: every earlier action's outcome is committed, this one's intent too
        states = {a.id: a.state for a in store.actions()}
        assert [states[i] for i in ids[: len(written)]] == ["applied"] * len(written)
        mf = store.managed_field(action.target)
        assert mf is not None and parse_intent(mf.resource_version) == (value, live.resource_version)
        new = real_write(action, value, live)
        written.append(action.target)
        if len(written) == 5:
            raise Crash  # the 5th write landed, its answer never journaled
        return new

    target.write = write  # type: ignore[method-assign]
    with pytest.raises(Crash):
        Actuator(target, store, pols, SafetyConfig()).apply_plan(p, NOW, action_ids=ids)
    states = {a.id: a.state for a in store.actions()}
    assert [states[i] for i in ids] == ["applied"] * 4 + ["planned"] * (N - 4)
    # a new process reconciles: the landed write is found applied, the rest were never written
    target.write = real_write  # type: ignore[method-assign]
    done = {aid: state for aid, state, _ in Actuator(target, store, pols, SafetyConfig()).reconcile(NOW + 5)}
    assert done == {ids[4]: "applied", **{i: "skipped" for i in ids[5:]}}
    assert store.managed_field("Deployment/default/w4").written_value == 3  # type: ignore[union-attr]


def test_a_second_action_on_the_same_object_sees_the_first_ones_record(kube, store):
    # the second reads the record anew (after committing the first's outcome): no human edit seen
    target, pols = setup(kube)
    web = WorkloadRef("Deployment", "default", "w0")
    p = Plan(NOW, (ScaleTo(web, 2, 3, R), ScaleTo(web, 3, 5, R)))
    results = Actuator(target, store, pols, SafetyConfig()).apply_plan(p, NOW)
    assert [r.outcome for r in results] == ["applied", "applied"], results
    assert kube.cluster.get(DEPLOYMENTS, "default", "w0")["spec"]["replicas"] == 5
    mf = store.managed_field("Deployment/default/w0")
    assert mf is not None and mf.written_value == 5 and mf.human_value is None


def test_store_journal_names_a_row_that_is_gone_and_writes_nothing(store):
    _, ids = store.record_plan(plan(), source="actuator")
    with pytest.raises(KeyError, match="999999"):
        store.journal([(ids[0], "applied", "ok"), (999_999, "applied", "ok")], [], NOW)
    with pytest.raises(ValueError, match="unknown action state"):
        store.journal([(ids[0], "done", "ok")], [], NOW)
    assert {a.state for a in store.actions()} == {"planned"}  # the transaction was rolled back


def test_an_intent_the_database_refuses_fails_its_action_and_keeps_the_earlier_outcomes(kube, store):
    from tests.conftest import fail_once

    target, pols = setup(kube)
    p = plan()
    _, ids = store.record_plan(p, source="actuator")
    real_write = target.write
    done: list[str] = []

    def write(action, value, live):
        done.append(action.target)
        if len(done) == 3:  # the 4th action's intent transaction fails once
            fail_once(store.engine, "UPDATE actions", "database is locked")
        return real_write(action, value, live)

    target.write = write  # type: ignore[method-assign]
    act = Actuator(target, store, pols, SafetyConfig())
    results = act.apply_plan(p, NOW, action_ids=ids)
    assert [r.outcome for r in results] == ["applied"] * 3 + ["failed"] + ["applied"] * (N - 4)
    assert "database is locked" in results[3].detail
    # the outcomes that transaction carried were committed by the next one: nothing left planned
    states = {a.id: a.state for a in store.actions()}
    assert [states[i] for i in ids] == [r.outcome for r in results]
    assert act.unsettled == set()


class _MoveTarget:
    """A Deployment ``web`` and its pod ``web-abc-1`` (ReplicaSet ``web-abc``); records evictions."""

    def __init__(self, on_move_read) -> None:  # type: ignore[no-untyped-def]
        self.replicas = 2
        self.evicted: list[str] = []
        self.on_move_read = on_move_read

    def live(self, action, quota_room=True):  # type: ignore[no-untyped-def]
        from actuator.base import LiveObject
        from scaleahead.types import MovePod

        if isinstance(action, MovePod):
            self.on_move_read()
            facts = {"on_from_node": 1, "pdb_disruptions_allowed": 5}
            return LiveObject(
                f"Pod/default/{action.pod}", "spec.nodeName", 1, "1", facts, owner=("ReplicaSet", "web-abc")
            )
        return LiveObject(action.target, "spec.replicas", self.replicas, "7", {}, uid="dep")

    def write(self, action, value, live):  # type: ignore[no-untyped-def]
        from actuator.base import LiveObject
        from scaleahead.types import MovePod

        if isinstance(action, MovePod):
            self.evicted.append(action.pod)
            return live
        self.replicas = value
        return LiveObject(action.target, "spec.replicas", value, "8", {}, uid="dep")


def test_a_journal_commit_failing_before_an_eviction_leaves_no_armed_steer(store: Store) -> None:
    """The commit before a pod move's eviction (the outcomes of the plan's earlier actions) runs
    before the steer is recorded: when it fails, the move fails with no steer left to send an
    unrelated new pod of the ReplicaSet to the planned node (found by a review on 2026-12-06: the
    steer was recorded first and stayed pending)."""
    from sqlalchemy.exc import OperationalError

    from scaleahead.types import MovePod

    armed = [False]

    @event.listens_for(store.engine, "before_cursor_execute")
    def blip(conn, cursor, statement, params, context, many):  # type: ignore[no-untyped-def]
        if armed[0] and statement.startswith("UPDATE actions"):
            armed[0] = False
            raise OperationalError(statement, params, Exception("database is locked"))

    target = _MoveTarget(lambda: armed.__setitem__(0, True))
    act = Actuator(target, store, [policy("web")], SafetyConfig(), steer_ttl_s=300)  # type: ignore[arg-type]
    web = WorkloadRef("Deployment", "default", "web")
    results = act.apply_plan(Plan(NOW, (ScaleTo(web, 2, 3, R), MovePod("default", "web-abc-1", "n1", "n2", R))), NOW)
    assert [r.outcome for r in results] == ["applied", "failed"]
    assert target.evicted == []
    assert store.steers(state="pending") == []
    assert store.consume_steer("default", "ReplicaSet", "web-abc", "web-abc-new", NOW + 10) is None
