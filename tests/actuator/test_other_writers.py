"""Others who write the fields scaleahead manages: a re-created object (a new UID) is not an edit; a
GitOps tool or an operator that keeps undoing scaleahead's writes is named and left alone longer."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

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


def owned_by(manager: str, *path: str, when: str = "2026-12-06T00:00:00Z") -> dict:
    """``metadata.managedFields`` as the API server keeps them: ``manager`` owns ``path``; the
    kube-controller-manager owns the status (kmock does not maintain managedFields: the test sets them)."""
    fields: dict = {}
    node = fields
    for key in path:
        node = node.setdefault(key, {})
    return {
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "subresource": "status",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:replicas": {}}},
            },
            {
                "manager": "scaleahead",
                "operation": "Update",
                "subresource": "scale",
                "time": "2025-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}},
            },
            {"manager": manager, "operation": "Update", "time": when, "fieldsType": "FieldsV1", "fieldsV1": fields},
        ]
    }


def run_minutes(kube, act, minutes, revert, action) -> list[int]:
    """Each minute the other writer puts its value back (``revert``), then scaleahead applies ``action``."""
    applied = []
    for minute in range(minutes):
        revert()
        now = NOW + 60 * minute
        if act.apply_plan(Plan(now, (action,)), now)[0].outcome == "applied":
            applied.append(minute)
    return applied


def test_a_gitops_tool_that_keeps_reverting_replicas_is_named_and_left_alone_longer_each_time(kube, store, caplog):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    act = actuator(kube, store, [policy()], human_edit_hold_s=3600)

    def argo_self_heal() -> None:
        if kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] != 3:
            kube.cluster.edit(
                DEPLOYMENTS,
                "default",
                "web",
                {"spec": {"replicas": 3}, "metadata": owned_by("argocd-controller", "f:spec", "f:replicas")},
            )

    with caplog.at_level(logging.INFO, logger="scaleahead.actuator"):
        applied = run_minutes(kube, act, 240, argo_self_heal, ScaleTo(WEB, 3, 8, R))
    # written at 0; undone, held an hour; written at 61; undone again: a persistent co-writer, held
    # two hours (not written again at 122 as before), and written once more at 182 (then four hours)
    assert applied == [0, 61, 182]
    warned = [r for r in caplog.records if getattr(r, "event", "") == "co_writer"]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    text = warned[0].getMessage()
    assert "argocd-controller has undone scaleahead's write twice in a row" in text
    assert "ignoreDifferences on /spec/replicas with syncOptions RespectIgnoreDifferences=true" in text
    assert "Flux: remove spec.replicas from the manifest" in text and "minReplicaCount" in text
    assert warned[0].field_manager == "argocd-controller"
    edits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("human edit:")]
    assert edits and all("set to 3 by argocd-controller" in m for m in edits)
    held = act.apply_plan(Plan(NOW + 60 * 100, (ScaleTo(WEB, 3, 8, R),)), NOW + 60 * 100)[0]
    assert held.outcome == "skipped"
    assert "was set to 3 by argocd-controller (scaleahead had set 8)" in held.detail
    assert "argocd-controller has undone 3 of scaleahead's writes in a row: a persistent co-writer" in held.detail
    until = datetime.fromtimestamp(NOW + 60 * 183 + 4 * 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"respected until {until}" in held.detail  # undone a third time at minute 183: four hours
    mf = store.managed_field(WEB.key)
    assert (mf.editor, mf.editor_reverts) == ("argocd-controller", 3)
    # scaleahead's own writes carry its field manager, so its managedFields entries are never another writer's
    patches = [str(r.url) for r in list(kube.cluster) if str(r.method.value) == "PATCH"]
    assert patches and all("fieldManager=scaleahead" in url for url in patches)


@pytest.mark.parametrize("key", [MIN_SCALE, "autoscaling.knative.dev/minScale"])
def test_a_knative_min_scale_reset_by_flux_names_it(kube, store, caplog, key):
    """Also in the older spelling, which scaleahead reads and writes since 2026-12-06: a review found
    the writer looked up under min-scale only there, so Flux was "someone else" and held an hour."""
    kube.cluster.put(KSVC, "default", "fn", {"spec": {"template": {"metadata": {"annotations": {key: "0"}}}}})
    act = actuator(kube, store, [policy("fn", kind="KnativeService")], human_edit_hold_s=3600)
    path = ("f:spec", "f:template", "f:metadata", "f:annotations", f"f:{key}")

    def flux() -> None:
        ann = kube.cluster.get(KSVC, "default", "fn")["spec"]["template"]["metadata"]["annotations"]
        if ann.get(key) != "0":
            body = {"spec": {"template": {"metadata": {"annotations": {key: "0"}}}}}
            kube.cluster.edit(KSVC, "default", "fn", body | {"metadata": owned_by("kustomize-controller", *path)})

    with caplog.at_level(logging.INFO, logger="scaleahead.actuator"):
        applied = run_minutes(kube, act, 130, flux, SetWarmPool(FN, 0, 2, 600.0, R))
    assert applied == [0, 61]  # not again at 122: each write would be a new Revision
    held = act.apply_plan(Plan(NOW + 60 * 125, (SetWarmPool(FN, 0, 2, 600.0, R),)), NOW + 60 * 125)[0]
    assert "was set to 0 by kustomize-controller" in held.detail and "persistent co-writer" in held.detail
    (warned,) = [r for r in caplog.records if getattr(r, "event", "") == "co_writer"]
    pointer = "/spec/template/metadata/annotations/" + key.replace("/", "~1")
    assert f"ignoreDifferences on {pointer} " in warned.getMessage()


def test_a_writer_the_object_does_not_name_or_another_writer_each_time_is_held_one_hold_as_before(kube, store):
    """Without managedFields naming the writer (or with a different one each time): no co-writer."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    act = actuator(kube, store, [policy()], human_edit_hold_s=3600)

    def unnamed() -> None:
        if kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] != 3:
            kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 3}})

    assert run_minutes(kube, act, 130, unnamed, ScaleTo(WEB, 3, 8, R)) == [0, 61, 122]
    assert "by someone else" in act.apply_plan(Plan(NOW + 60 * 130, (ScaleTo(WEB, 3, 8, R),)), NOW + 60 * 130)[0].detail
    people = iter(["kubectl-edit", "kubectl-client-side-apply", "kubectl-edit", "kubectl-scale"])

    def people_by_turns() -> None:
        if kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] != 3:
            fields = owned_by(next(people), "f:spec", "f:replicas")
            kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 3}, "metadata": fields})

    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(3))
    act = actuator(kube, store, [policy("api")], human_edit_hold_s=3600)
    api = WorkloadRef("Deployment", "default", "api")

    def api_people() -> None:
        if kube.cluster.get(DEPLOYMENTS, "default", "api")["spec"]["replicas"] != 3:
            fields = owned_by(next(people), "f:spec", "f:replicas")
            kube.cluster.edit(DEPLOYMENTS, "default", "api", {"spec": {"replicas": 3}, "metadata": fields})

    assert run_minutes(kube, act, 130, api_people, ScaleTo(api, 3, 8, R)) == [0, 61, 122]
    assert store.managed_field(api.key).editor == "kubectl-edit"


def test_a_co_writer_that_stopped_is_forgotten_once_scaleaheads_value_stands_a_whole_hold(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    act = actuator(kube, store, [policy()], human_edit_hold_s=600)
    reverting = [True]

    def argo() -> None:
        if reverting[0] and kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] != 3:
            fields = owned_by("argocd-controller", "f:spec", "f:replicas")
            kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 3}, "metadata": fields})

    assert run_minutes(kube, act, 30, argo, ScaleTo(WEB, 3, 8, R)) == [0, 11]  # then held 20 min
    assert store.managed_field(WEB.key).editor_reverts == 2
    reverting[0] = False  # ignoreDifferences configured: Argo CD leaves spec.replicas alone now
    for minute in range(30, 60):
        now = NOW + 60 * minute
        act.apply_plan(Plan(now, (ScaleTo(WEB, 8, 8, R),)), now)  # a no-op: nothing read
        act.apply_plan(Plan(now, (ScaleTo(WEB, 3, 8, R),)), now)  # read: scaleahead's 8 stands
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 8
    assert (store.managed_field(WEB.key).editor, store.managed_field(WEB.key).editor_reverts) == (None, 0)
