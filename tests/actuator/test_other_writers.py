"""Others who write the fields scaleahead manages: a re-created object (a new UID) is not an edit."""

from __future__ import annotations

import logging

import pytest
from kubeemu import DEPLOYMENTS, HPAS, KSVC, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import MIN_SCALE, KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
WEB = WorkloadRef("Deployment", "default", "web")
FN = WorkloadRef("KnativeService", "default", "fn")


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def actuator(kube, store, policies, **cfg) -> Actuator:
    return Actuator(KubernetesTarget(kube.api_client(), policies, timeout_s=2.0), store, policies, SafetyConfig(**cfg))


def uid(body: dict, value: str) -> dict:
    body["metadata"] = {**body.get("metadata", {}), "uid": value}
    return body


def test_a_deployment_deleted_and_created_again_is_managed_from_its_new_value_not_held_as_an_edit(kube, store, caplog):
    kube.cluster.put(DEPLOYMENTS, "default", "web", uid(deployment(2), "uid-1"))
    act = actuator(kube, store, [policy()], human_edit_hold_s=3600)
    assert act.apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 8, R),)), NOW)[0].outcome == "applied"
    # deleted, then created again from its manifest (replicas: 1): a new object, a new UID
    kube.cluster.objects[DEPLOYMENTS, "default", "web"].delete()
    kube.cluster.put(DEPLOYMENTS, "default", "web", uid(deployment(1), "uid-2"))
    with caplog.at_level(logging.INFO, logger="scaleahead.actuator"):
        res = act.apply_plan(Plan(NOW + 60, (ScaleTo(WEB, 1, 8, R),)), NOW + 60)[0]
    assert res.outcome == "applied", res.detail
    assert "human edit" not in res.detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 8
    recreated = [r for r in caplog.records if getattr(r, "event", "") == "target_recreated"]
    assert len(recreated) == 1 and "UID uid-2, was uid-1" in recreated[0].getMessage()
    mf = store.managed_field(WEB.key)
    # the new object's value is the field's original now, and its UID is the one recorded
    assert (mf.uid, mf.original_recorded, mf.original_value, mf.written_value) == ("uid-2", True, 1, 8)
    # an edit of this (same) object is still an edit
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 3}})
    held = act.apply_plan(Plan(NOW + 120, (ScaleTo(WEB, 3, 8, R),)), NOW + 120)[0]
    assert held.outcome == "skipped" and "was set to 3 by someone else" in held.detail


def test_a_knative_service_created_again_without_min_scale_is_not_an_edit_to_0(kube, store):
    kube.cluster.put(KSVC, "default", "fn", {"metadata": {"uid": "k1"}, "spec": {"template": {"metadata": {}}}})
    pols = [policy("fn", kind="KnativeService")]
    act = actuator(kube, store, pols, human_edit_hold_s=3600)
    assert act.apply_plan(Plan(NOW, (SetWarmPool(FN, 0, 2, 600.0, R),)), NOW)[0].outcome == "applied"
    kube.cluster.objects[KSVC, "default", "fn"].delete()
    kube.cluster.put(KSVC, "default", "fn", {"metadata": {"uid": "k2"}, "spec": {"template": {"metadata": {}}}})
    res = act.apply_plan(Plan(NOW + 60, (SetWarmPool(FN, 0, 2, 600.0, R),)), NOW + 60)[0]
    assert res.outcome == "applied", res.detail
    ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
    assert ann[MIN_SCALE] == "2"
    mf = store.managed_field(FN.key)
    # the new Service had no min-scale: giving it back (its policy removed) removes the annotation
    assert (mf.uid, mf.original_recorded, mf.original_value) == ("k2", True, None)


def test_a_record_without_a_uid_learns_it_from_a_read_and_then_tells_a_new_object(kube, store):
    """A record from before migration 0011_managed_uid has no UID: the next read or write records it."""
    kube.cluster.put(
        HPAS, "default", "web-hpa", {"metadata": {"uid": "h1"}, "spec": {"minReplicas": 2, "maxReplicas": 9}}
    )
    act = actuator(kube, store, [policy(mode="floor", hpa="web-hpa")])
    target = "HorizontalPodAutoscaler/default/web-hpa"
    store.set_managed_field(
        target, "spec.minReplicas", 2, kube.cluster.get(HPAS, "default", "web-hpa")["metadata"]["resourceVersion"], NOW
    )
    assert store.managed_field(target).uid is None
    assert act.apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 2, R),)), NOW)[0].outcome == "skipped"  # a no-op: no read
    res = act.apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 4, R),)), NOW)[0]
    assert res.outcome == "applied" and store.managed_field(target).uid == "h1"
    kube.cluster.objects[HPAS, "default", "web-hpa"].delete()
    kube.cluster.put(
        HPAS, "default", "web-hpa", {"metadata": {"uid": "h2"}, "spec": {"minReplicas": 1, "maxReplicas": 9}}
    )
    again = act.apply_plan(Plan(NOW + 60, (ScaleTo(WEB, 1, 4, R),)), NOW + 60)[0]
    assert again.outcome == "applied", again.detail
