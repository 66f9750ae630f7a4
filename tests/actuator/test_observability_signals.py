"""What an SRE sees of faults that were log lines only until 2026-12-06 (the observability audit,
finding 2): policies refused, the HPA list failing, status writes failing and a persistent
co-writer are metrics (bounded labels: reasons and result classes; a workload only in the
per-workload series the daemon forgets with its policy), and a refused policy is logged when its
refusal appears or changes, not at every 30 s reload. The official client against the emulated API
server, the daemon's own ``Metrics``."""

from __future__ import annotations

import logging
from typing import Any

import kmock
import pytest
from kubeemu import DEPLOYMENTS, Fault, deployment, policy
from kubernetes import client

from actuator.applying import Actuator
from actuator.autoscalers import AutoscalerCheck
from actuator.kubernetes import KubernetesTarget
from actuator.policy_resources import GROUP, PLURAL, VERSION, ClusterPolicies, PolicyStatusWriter, publishing_rejections
from actuator.safety import SafetyConfig
from scaleahead.observability import Metrics
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

POLICIES = kmock.resource(GROUP, VERSION, PLURAL)
R = Reason("test", "because the test says so")
NOW = 1_000_000.0
WEB = WorkloadRef("Deployment", "default", "web")


def _cr(name: str, ns: str = "shop", target: str | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "target": {"name": target or name},
            "demand": {"query": "sum(rate(x[1m]))"},
            "capacityPerReplica": 2,
            **spec,
        },
    }


@pytest.fixture
def api(kube):  # type: ignore[no-untyped-def]
    """The audit's cluster: web (valid), webdup (web's target again), api (an HPA scales it), bad
    (capacityPerReplica -1) and cross (a target in another namespace)."""
    kube.cluster.resources[POLICIES] = kmock.ResourceInfo(namespaced=True)
    api = kube.api_client()
    co = client.CustomObjectsApi(api)
    for name in ("web", "api"):
        kube.cluster.put(DEPLOYMENTS, "shop", name, deployment(2))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("webdup", target="web"))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("api"))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("bad", capacityPerReplica=-1))
    cross = _cr("cross")
    cross["spec"]["target"]["namespace"] = "other"
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, cross)
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(
        "shop",
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "api-hpa", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
                "maxReplicas": 9,
            },
        },
    )
    return api


def _rejected(metrics: Metrics) -> dict[str, float | None]:
    reg = metrics.registry
    return {
        reason: reg.get_sample_value("scaleahead_policies_rejected", {"reason": reason})
        for reason in ("InvalidSpec", "DuplicateTarget", "Refused", "ConflictingAutoscaler")
    }


def test_refused_policies_are_a_gauge_by_reason_and_logged_once_per_refusal_not_per_reload(api, caplog) -> None:  # type: ignore[no-untyped-def]
    metrics = Metrics()
    assert set(_rejected(metrics).values()) == {0.0}, "exported at 0 before the first load"
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True), on_load=metrics.policies_loaded)
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        for _ in range(4):  # the 30 s reloads of two minutes
            assert [p.metadata.name for p in source.load()] == ["web"]
    assert _rejected(metrics) == {"InvalidSpec": 1, "DuplicateTarget": 1, "Refused": 1, "ConflictingAutoscaler": 1}
    lines = [r for r in caplog.records if getattr(r, "event", "") == "policy_invalid"]
    # until 2026-12-06: 16 lines (each refusal at every reload), with no policy or reason field
    assert sorted((r.policy, r.reason) for r in lines) == [  # type: ignore[attr-defined]
        ("shop/api", "ConflictingAutoscaler"),
        ("shop/bad", "InvalidSpec"),
        ("shop/cross", "Refused"),
        ("shop/webdup", "DuplicateTarget"),
    ]
    # One refusal fixed, another changed (its reason and why): only the changed one is logged again.
    co = client.CustomObjectsApi(api)
    co.patch_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "bad", {"spec": {"capacityPerReplica": 3}})
    co.patch_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "webdup", {"spec": {"capacityPerReplica": -2}})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        source.load()
        source.load()
    again = [(r.policy, r.reason) for r in caplog.records if getattr(r, "event", "") == "policy_invalid"]  # type: ignore[attr-defined]
    assert again == [("shop/webdup", "InvalidSpec")]
    assert _rejected(metrics) == {"InvalidSpec": 1, "DuplicateTarget": 0, "Refused": 1, "ConflictingAutoscaler": 1}
    # a refusal that went and came back is logged again
    co.patch_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "webdup", {"spec": {"capacityPerReplica": 2}})
    source.load()
    co.patch_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "webdup", {"spec": {"capacityPerReplica": -2}})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        source.load()
    assert [r.policy for r in caplog.records if getattr(r, "event", "") == "policy_invalid"] == ["shop/webdup"]  # type: ignore[attr-defined]


def test_an_hpa_list_that_fails_sets_the_autoscaler_check_gauge_to_0_until_a_list_answers(api, kube) -> None:  # type: ignore[no-untyped-def]
    metrics = Metrics()
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True), on_load=metrics.policies_loaded)
    up = lambda: metrics.registry.get_sample_value("scaleahead_autoscaler_check_up")  # noqa: E731
    source.load()
    assert up() == 1
    kube.cluster.faults.append(Fault("GET", "/horizontalpodautoscalers", status=403, times=3))
    for _ in range(3):
        source.load()
        assert up() == 0, "the whole failing streak, not only its first load (which alone was logged)"
    source.load()
    assert up() == 1


def test_failed_status_writes_are_counted_by_status_class_though_logged_once(api, kube, caplog) -> None:  # type: ignore[no-untyped-def]
    metrics = Metrics()
    writes = lambda result: metrics.registry.get_sample_value("scaleahead_status_writes_total", {"result": result})  # noqa: E731
    assert writes("failed_4xx") == 0 and writes("ok") == 0, "exported at 0 before the first write"
    source = ClusterPolicies(api)
    writer = PolicyStatusWriter(api, refresh_s=0.0, on_write=metrics.status_written)
    load = publishing_rejections(source, writer, lambda: NOW)
    load()
    ok = writes("ok")
    assert ok == 3  # webdup, bad, cross (no HPA check here: api is planned)
    kube.cluster.faults.append(Fault("PATCH", "/status", status=403, times=6))
    kube.cluster.faults.append(Fault("PATCH", "/status", status=503, times=3))
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        load()
        load()
        load()
    assert writes("failed_4xx") == 6 and writes("failed_5xx") == 3 and writes("ok") == ok
    # one line per object and reason (as before), while the counter sees every failed write
    assert len([r for r in caplog.records if getattr(r, "event", "") == "status_failed"]) == 6
    load()
    assert writes("ok") == ok + 3


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def test_a_workload_held_for_a_co_writer_is_a_gauge_that_goes_when_scaleahead_writes_again(kube, store, caplog) -> None:  # type: ignore[no-untyped-def]
    from test_other_writers import owned_by

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    act = Actuator(
        KubernetesTarget(kube.api_client(), [policy()], timeout_s=2.0),
        store,
        [policy()],
        SafetyConfig(human_edit_hold_s=600),
    )
    metrics = Metrics()

    def held(now: float) -> dict[str, float]:
        act.apply_plan(Plan(now, (ScaleTo(WEB, 3, 8, R),)), now)
        metrics.observe_held(act.held_for, {WEB.key})
        reg = metrics.registry
        return {
            cause: v
            for cause in ("human_edit", "co_writer")
            if (v := reg.get_sample_value("scaleahead_workload_held", {"workload": WEB.key, "cause": cause}))
            is not None
        }

    def argo() -> None:
        kube.cluster.edit(
            DEPLOYMENTS,
            "default",
            "web",
            {"spec": {"replicas": 3}, "metadata": owned_by("argocd-controller", "f:spec", "f:replicas")},
        )

    assert held(NOW) == {}  # written: 3 -> 8
    argo()
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator"):
        assert held(NOW + 60) == {"human_edit": 1.0}  # undone once: an edit, respected 10 minutes
    # the edit's warning has an event (it had none until 2026-12-06), the object and the writer
    (edit,) = [r for r in caplog.records if getattr(r, "event", "") == "human_edit"]
    assert edit.getMessage().startswith(
        "human edit: Deployment/default/web spec.replicas set to 3 by argocd-controller"
    )
    assert (edit.target, edit.field_manager, edit.hold_s) == (WEB.key, "argocd-controller", 600)  # type: ignore[attr-defined]
    assert held(NOW + 120) == {"human_edit": 1.0}
    assert held(NOW + 720) == {}  # the hold is over: written again
    argo()
    assert held(NOW + 780) == {"co_writer": 1.0}  # undone twice in a row by the same writer
    # a no-op plan (nothing to write) holds nothing; the series of a workload no longer held goes
    act.apply_plan(Plan(NOW + 840, (ScaleTo(WEB, 3, 3, R),)), NOW + 840)
    metrics.observe_held(act.held_for, {WEB.key})
    assert act.held_for == {}
    assert (
        metrics.registry.get_sample_value("scaleahead_workload_held", {"workload": WEB.key, "cause": "co_writer"})
        is None
    )
    # and a removed policy's series are forgotten with its other per-workload series
    metrics.observe_held({WEB.key: "co_writer"}, {WEB.key})
    metrics.forget({WEB.key})
    assert (
        metrics.registry.get_sample_value("scaleahead_workload_held", {"workload": WEB.key, "cause": "co_writer"})
        is None
    )
