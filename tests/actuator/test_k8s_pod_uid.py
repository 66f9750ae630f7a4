"""A pod move is about the pod that was read, by UID: a StatefulSet re-creates ``db-0`` under the same
name, and the new pod is neither mistaken for the evicted one nor evicted under the old plan."""

from __future__ import annotations

import time

import kubeemu
import pytest
from kubeemu import PODS, Fault

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import MovePod, Plan, Reason
from storage import Store

R = Reason("test", "because the test says so")
MOVE = MovePod("default", "db-0", "n1", "n2", R)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def sts_pod(node: str, uid: str) -> dict:
    meta = {
        "uid": uid,
        "labels": {"app": "db"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}],
    }
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}


def actuator(kube, store, timeout_s: float = 2.0) -> Actuator:
    target = KubernetesTarget(kube.api_client(), [], timeout_s=timeout_s)
    return Actuator(target, store, [], SafetyConfig(), steer_ttl_s=300)


def recreate_on_evict(monkeypatch, node: str, before: bool) -> list[str]:
    """The StatefulSet controller re-creates db-0 (new UID, on ``node``) right ``before`` the
    eviction is handled, or right after it landed. Returns the evictions' UID preconditions."""
    orig = kubeemu.Cluster._evict
    seen: list[str] = []

    def evict(self, request):
        seen.append(((request.data.get("deleteOptions") or {}).get("preconditions") or {}).get("uid", ""))
        if before and len(seen) == 1:
            self.put(PODS, "default", "db-0", sts_pod(node, "new-uid"))
        resp = orig(self, request)
        if not before:
            self.put(PODS, "default", "db-0", sts_pod(node, "new-uid"))
        return resp

    monkeypatch.setattr(kubeemu.Cluster, "_evict", evict)
    return seen


def test_a_landed_eviction_whose_answer_was_lost_is_applied_though_a_new_pod_took_the_name(kube, store, monkeypatch):
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "old-uid"))
    seen = recreate_on_evict(monkeypatch, "", before=False)
    # The answer comes 7 s late, 5 s past the 2 s timeout (the emulator runs in this process: only a
    # stall that long could bring it within); the bound leaves 3 s for the reads and the store's writes
    # (the actuator is made before the clock starts: the first one made imports the API client's models).
    kube.cluster.faults.append(Fault("POST", "/eviction", delay_s=7.0, after=True))
    act = actuator(kube, store, timeout_s=2.0)
    started = time.monotonic()
    (res,) = act.apply_plan(Plan(time.time(), (MOVE,)), time.time())
    assert time.monotonic() - started < 5.0  # the answer was not waited for
    assert seen == ["old-uid"]
    assert res.outcome == "applied", res.detail
    (steer,) = store.steers()
    assert steer.state == "pending"  # the replacement is still steered to n2
    assert [r.state for r in store.actions()] == ["applied"]


def test_a_pod_recreated_under_the_same_name_on_the_same_node_is_not_evicted_by_the_old_plan(kube, store, monkeypatch):
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "old-uid"))
    seen = recreate_on_evict(monkeypatch, "n1", before=True)
    (res,) = actuator(kube, store).apply_plan(Plan(time.time(), (MOVE,)), time.time())
    assert seen == ["old-uid"]  # refused (409: precondition failed); the re-read found another pod
    assert res.outcome == "skipped"
    assert "was re-created since it was read (a new pod of that name, UID new-uid)" in res.detail
    assert kube.cluster.get(PODS, "default", "db-0")["metadata"]["uid"] == "new-uid"  # not evicted
    (steer,) = store.steers()
    assert steer.state == "cancelled"
    assert [r.state for r in store.actions()] == ["skipped"]


def test_the_eviction_names_the_uid_it_read(kube, store, monkeypatch):
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "old-uid"))
    seen = recreate_on_evict(monkeypatch, "", before=False)
    (res,) = actuator(kube, store).apply_plan(Plan(time.time(), (MOVE,)), time.time())
    assert res.outcome == "applied" and seen == ["old-uid"]


PLANNED = MovePod("default", "db-0", "n1", "n2", R, pod_uid="old-uid")


def test_a_pod_recreated_before_the_actuator_reads_it_is_not_the_planned_one(kube, store):
    # The plan named db-0 by its UID; the StatefulSet re-created db-0 on the same node before the
    # actuator's first read. Without the UID the new pod looks like the planned one and is evicted.
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "new-uid"))
    (res,) = actuator(kube, store).apply_plan(Plan(time.time(), (PLANNED,)), time.time())
    assert res.outcome == "skipped"
    assert "re-created under its name since the plan" in res.detail
    assert kube.cluster.get(PODS, "default", "db-0")["metadata"]["uid"] == "new-uid"
    assert not [w for w in kube.cluster.writes() if w[0] == "POST"]  # no eviction sent
    assert store.steers() == []


def test_the_planned_uid_is_journaled_and_read_back_by_reconciliation(kube, store):
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "old-uid"))
    move = MovePod(
        "default", "db-0", "n1", "n2", Reason("rebalance.drain", "m", {"pod_uid": "old-uid"}), pod_uid="old-uid"
    )
    _, (aid,) = store.record_plan(Plan(time.time(), (move,)), source="loop", state="planned")
    # The process evicted db-0 and died before journaling; its StatefulSet re-created it on n1.
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "new-uid"))
    done = {i: (state, why) for i, state, why in actuator(kube, store).reconcile(time.time())}
    assert done[aid][0] == "applied", done[aid][1]
    assert not [w for w in kube.cluster.writes() if w[0] == "POST"]


def test_a_journal_row_without_a_uid_is_reconciled_as_before(kube, store):
    # Rows journaled before moves carried UIDs: a pod of that name on the from node counts as not
    # moved, and the next plan decides.
    kube.cluster.put(PODS, "default", "db-0", sts_pod("n1", "new-uid"))
    _, (aid,) = store.record_plan(Plan(time.time(), (MOVE,)), source="loop", state="planned")
    done = {i: (state, why) for i, state, why in actuator(kube, store).reconcile(time.time())}
    assert done[aid][0] == "skipped"
