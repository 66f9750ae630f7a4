"""Policies that would fight a HorizontalPodAutoscaler are refused (docs/actuator.md, Other
autoscalers): the official client against the emulated API server, HPAs as Kubernetes stores them.

Before 2026-12-06 a policy in mode direct on a Deployment an HPA also scales was planned: the HPA's
writes to spec.replicas looked like a person's edit, scaleahead held off for an hour and then
wrote again, and the two took turns."""

from __future__ import annotations

import logging
from typing import Any

import kmock
import pytest
from kubeemu import DEPLOYMENTS, HPAS, Fault, deployment, policy
from kubernetes import client

from actuator.autoscalers import CONFLICT, AutoscalerCheck
from actuator.policy_resources import GROUP, PLURAL, VERSION, ClusterPolicies, PolicyStatusWriter, publishing_rejections

POLICIES = kmock.resource(GROUP, VERSION, PLURAL)


def _hpa(name: str, target: str, ns: str = "shop", kind: str = "Deployment") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
            "minReplicas": 1,
            "maxReplicas": 10,
        },
    }


def _cr(name: str, ns: str = "shop", **target: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "target": {"name": name, **target},
            "demand": {"query": "sum(rate(x[1m]))"},
            "capacityPerReplica": 2,
        },
    }


@pytest.fixture
def api(kube):  # type: ignore[no-untyped-def]
    kube.cluster.resources[POLICIES] = kmock.ResourceInfo(namespaced=True)
    api = kube.api_client()
    co = client.CustomObjectsApi(api)
    scaling = client.AutoscalingV2Api(api)
    for name in ("web", "api", "batch", "plain"):
        kube.cluster.put(DEPLOYMENTS, "shop", name, deployment(2))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))  # direct, an HPA on it
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("api", mode="floor", hpaName="api-hpa"))
    # floor on the HPA of another workload
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("batch", mode="floor", hpaName="web"))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("plain"))  # direct, no HPA
    scaling.create_namespaced_horizontal_pod_autoscaler("shop", _hpa("web", "web"))
    scaling.create_namespaced_horizontal_pod_autoscaler("shop", _hpa("api-hpa", "api"))
    # an HPA of another namespace on a Deployment of the same name is not this one's
    scaling.create_namespaced_horizontal_pod_autoscaler("other", _hpa("plain", "plain", ns="other"))
    return api


@pytest.mark.parametrize("cluster_wide", [True, False])
def test_a_policy_that_would_fight_an_hpa_is_refused_and_planned_again_once_the_hpa_is_gone(
    api, kube, cluster_wide, caplog
) -> None:  # type: ignore[no-untyped-def]
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=cluster_wide))
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        kept = source.load()
    assert sorted(p.metadata.name for p in kept) == ["api", "plain"]
    why = {r.name: r for r in source.rejected}
    assert set(why) == {"web", "batch"}
    assert {r.reason for r in why.values()} == {CONFLICT}
    assert why["web"].message.startswith(
        "HorizontalPodAutoscaler shop/web also scales Deployment/shop/web: in mode direct each would undo "
        "the other's writes to spec.replicas. Set spec.target.mode: floor and spec.target.hpaName: web"
    )
    assert "names the HorizontalPodAutoscaler of Deployment/shop/web, not of Deployment/shop/batch" in (
        why["batch"].message
    )
    assert "Name the HPA that scales Deployment/shop/batch" in why["batch"].message
    # still claimed: the daemon does not hand their workloads back meanwhile
    assert {"Deployment/shop/web", "Deployment/shop/batch"} <= source.rejected_targets
    assert any("shop/web is refused" in r.getMessage() for r in caplog.records)
    lists = [p for m, p in kube.cluster.calls() if m == "GET" and p.endswith("/horizontalpodautoscalers")]
    assert lists == (
        ["/apis/autoscaling/v2/horizontalpodautoscalers"]
        if cluster_wide
        else ["/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers"]
    )

    client.AutoscalingV2Api(api).delete_namespaced_horizontal_pod_autoscaler("web", "shop")
    kept = source.load()
    # batch's hpaName now names no HPA: not refused, each of its actions will say so
    assert sorted(p.metadata.name for p in kept) == ["api", "batch", "plain", "web"]
    assert source.rejected == []


def test_a_floor_on_another_workloads_hpa_is_told_the_right_one(api, kube) -> None:  # type: ignore[no-untyped-def]
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler("shop", _hpa("batch-hpa", "batch"))
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True))
    source.load()
    (batch,) = [r for r in source.rejected if r.name == "batch"]
    assert "Set spec.target.hpaName: batch-hpa (it scales Deployment/shop/batch)" in batch.message


def test_an_hpa_list_that_fails_keeps_the_last_list_and_says_so_once(api, kube, caplog) -> None:  # type: ignore[no-untyped-def]
    check = AutoscalerCheck(api, cluster_wide=True)
    source = ClusterPolicies(api, autoscalers=check)
    kube.cluster.faults.append(Fault("GET", "/horizontalpodautoscalers", status=403, times=2))
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.autoscalers"):
        first = source.load()  # none read yet: nothing refused
        assert len(first) == 4
        source.load()
    failed = [r for r in caplog.records if getattr(r, "event", "") == "autoscaler_check_failed"]
    assert len(failed) == 1, "once per failing streak"
    assert "HTTP 403" in failed[0].getMessage() and "deploy/base/rbac.yaml" in failed[0].getMessage()
    assert "none yet: none is refused" in failed[0].getMessage()
    assert len(source.load()) == 2  # read: web and batch refused
    kube.cluster.faults.append(Fault("GET", "/horizontalpodautoscalers", status=500))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.autoscalers"):
        kept = source.load()
    assert sorted(p.metadata.name for p in kept) == ["api", "plain"], "the last list stays in force"
    assert "judged on the last list read." in caplog.records[0].getMessage()


def test_a_malformed_hpa_is_skipped_and_a_non_list_answer_is_a_failed_list(api, kube) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(HPAS, "shop", "broken", {"spec": {"scaleTargetRef": "web"}})
    kube.cluster.put(HPAS, "shop", "nameless", {"spec": {"scaleTargetRef": {"kind": "Deployment"}}})
    check = AutoscalerCheck(api, cluster_wide=True)
    check.refresh([])
    assert ("shop", "broken") not in check.targets and ("shop", "nameless") not in check.targets
    assert check.targets[("shop", "web")] == "Deployment/shop/web"
    kube.cluster.faults.append(Fault("GET", "/horizontalpodautoscalers", html="<html>sign in</html>"))
    check.refresh([])
    assert check.targets[("shop", "web")] == "Deployment/shop/web", "kept"


def test_the_refusal_is_written_to_the_policy_status(api, kube) -> None:  # type: ignore[no-untyped-def]
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True))
    load = publishing_rejections(source, PolicyStatusWriter(api), lambda: 1_800_000_000.0)
    load()
    status = kube.cluster.get(POLICIES, "shop", "web")["status"]  # type: ignore[index]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Accepted"]
    assert (cond["status"], cond["reason"]) == ("False", CONFLICT)
    assert "also scales Deployment/shop/web" in status["lastReason"]


def test_file_policies_that_would_fight_an_hpa_are_dropped_at_start(api, kube, caplog) -> None:  # type: ignore[no-untyped-def]
    from scaleahead.commands.run import _without_hpa_fights

    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler("default", _hpa("web", "web", "default"))
    pols = [policy("web"), policy("api"), policy("web2", mode="floor", hpa="web")]
    with caplog.at_level(logging.ERROR, logger="scaleahead.run"):
        kept = _without_hpa_fights(api, pols)
    assert [p.metadata.name for p in kept] == ["api"]
    assert sum("is refused" in r.getMessage() for r in caplog.records) == 2
    lists = [p for m, p in kube.cluster.calls() if m == "GET" and p.endswith("/horizontalpodautoscalers")]
    assert lists == ["/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"], "the targets' namespace"


@pytest.mark.parametrize("source", ["cluster", "files"])
def test_run_leaves_a_workload_an_hpa_scales_alone(api, kube, tmp_path, source: str) -> None:  # type: ignore[no-untyped-def]
    """``scaleahead run --target kubernetes`` end to end, policies from the cluster or from files."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import write_kubeconfig

    write_kubeconfig(tmp_path / "kubeconfig", kube.url)
    argv = ["run", "--history", "trace:nasa-10s", "--target", "kubernetes", "--once", "--virtual"]
    argv += ["--kubeconfig", str(tmp_path / "kubeconfig"), "--db", f"sqlite:///{tmp_path / 'r.db'}"]
    if source == "files":
        docs = [
            f"metadata: {{name: {n}, namespace: shop}}\n"
            f"spec:\n  target: {{name: {n}}}\n  demand: {{query: 'x'}}\n  capacityPerReplica: 2\n"
            for n in ("web", "plain")
        ]
        (tmp_path / "policies.yaml").write_text("\n---\n".join(docs))
        argv += ["--policies", str(tmp_path / "policies.yaml")]
    env = {k: v for k, v in os.environ.items() if k != "POD_NAME"}
    env |= {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "SCALEAHEAD_FORECAST__MODEL": "naive"}
    env |= {"SCALEAHEAD_ACTUATION__NAMESPACE": "shop"}
    out = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *argv], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "HorizontalPodAutoscaler shop/web also scales Deployment/shop/web" in out.stderr
    writes = kube.cluster.writes()
    assert any(p.endswith("/deployments/plain/scale") for _, p in writes), writes
    assert not any("/deployments/web" in p for _, p in writes), "the HPA's workload is left alone"
    if source == "cluster":
        status = kube.cluster.get(POLICIES, "shop", "web")["status"]  # type: ignore[index]
        assert [c["reason"] for c in status["conditions"] if c["type"] == "Accepted"] == [CONFLICT]


def test_an_hpa_that_keda_manages_is_no_floor_and_the_advice_says_so(api, kube) -> None:  # type: ignore[no-untyped-def]
    """KEDA scales through an HPA it owns (``keda-hpa-NAME``) and sets its spec back: a floor on it
    would be undone, so neither mode direct (whose advice would be that floor) nor mode floor on
    it is planned."""
    scaling = client.AutoscalingV2Api(api)
    scaling.delete_namespaced_horizontal_pod_autoscaler("web", "shop")
    keda = _hpa("keda-hpa-web", "web")
    keda["metadata"]["ownerReferences"] = [
        {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": "web", "uid": "u1", "controller": True}
    ]
    scaling.create_namespaced_horizontal_pod_autoscaler("shop", keda)
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("web2", mode="floor", hpaName="keda-hpa-web")
    )
    kube.cluster.put(DEPLOYMENTS, "shop", "web2", deployment(2))
    scaling.patch_namespaced_horizontal_pod_autoscaler(
        "keda-hpa-web",
        "shop",
        {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web2"}}},
    )
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True))
    source.load()
    why = {r.name: r.message for r in source.rejected}
    assert "web2" in why and "is managed by ScaledObject web, which sets the HPA's minReplicas back" in why["web2"]
    assert "Leave Deployment/shop/web2 to ScaledObject web" in why["web2"]
    # the same HPA on web, the policy in mode direct: not told to take KEDA's HPA as its floor
    scaling.patch_namespaced_horizontal_pod_autoscaler(
        "keda-hpa-web",
        "shop",
        {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}},
    )
    source.load()
    why = {r.name: r.message for r in source.rejected}
    assert "keda-hpa-web is managed by ScaledObject web" in why["web"]
    assert "spec.target.mode: floor and spec.target.hpaName: keda-hpa-web" not in why["web"]
    assert "web2" in why, "its floor names the HPA of another workload now"


def test_a_policy_refused_for_an_hpa_claims_neither_its_workload_nor_its_tenants_floors(api, kube) -> None:  # type: ignore[no-untyped-def]
    """Found by a review: the HPA check ran after the others, so a refused policy still held its
    workload (the floor policy its own message asks for was refused as a duplicate of it, at every
    reload) and its tenant's floor budget (another policy of the tenant was refused for floors no
    planned policy held)."""
    from actuator.policy_resources import PolicyLimits

    co = client.CustomObjectsApi(api)
    for name in ("api", "batch", "plain"):
        co.delete_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, name)
    old = _cr("web")
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    old["spec"]["minReplicas"] = 4
    co.delete_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, old)
    fixed = _cr("web-floor", mode="floor", hpaName="web")
    fixed["spec"]["target"]["name"] = "web"
    fixed["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    fixed["spec"]["minReplicas"] = 3
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, fixed)
    limits = PolicyLimits(capacity={"shop": 5})
    source = ClusterPolicies(api, autoscalers=AutoscalerCheck(api, cluster_wide=True), limits=limits)
    for _ in range(2):  # and again at the next reload
        assert [p.metadata.name for p in source.load()] == ["web-floor"]
        assert [(r.name, r.reason) for r in source.rejected] == [("web", CONFLICT)]
        assert "Deployment/shop/web" in source.rejected_targets


def test_a_namespace_whose_hpa_list_keeps_failing_is_warned_about_once(api, kube, caplog) -> None:  # type: ignore[no-untyped-def]
    """One flag for every namespace was reset by the namespace that could be listed (found by a
    review): the other's failure was warned about at every reload."""
    import logging

    check = AutoscalerCheck(api)  # one list per namespace of the targets
    pols = [policy("web"), policy("api")]
    other = pols[1].model_copy(
        update={
            "spec": pols[1].spec.model_copy(
                update={"target": pols[1].spec.target.model_copy(update={"namespace": "team-b"})}
            )
        }
    )
    kube.cluster.faults.append(Fault("GET", "/namespaces/team-b/horizontalpodautoscalers", status=403, times=3))
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.autoscalers"):
        for _ in range(3):
            check.refresh([pols[0], other])
    failed = [r for r in caplog.records if getattr(r, "event", "") == "autoscaler_check_failed"]
    assert len(failed) == 1 and "namespace team-b" in failed[0].getMessage()


def test_a_namespace_no_policy_targets_any_more_no_longer_counts_as_failing(api, kube) -> None:  # type: ignore[no-untyped-def]
    """Found by a review: its last failure kept ``up`` (scaleahead_autoscaler_check_up) at 0, and
    ScaleaheadAutoscalerCheckFailing firing, until a restart."""
    check = AutoscalerCheck(api)
    web = policy("web")
    other = web.model_copy(
        update={"spec": web.spec.model_copy(update={"target": web.spec.target.model_copy(update={"namespace": "b"})})}
    )
    kube.cluster.faults.append(Fault("GET", "/namespaces/b/horizontalpodautoscalers", status=403, times=5))
    check.refresh([web, other])
    assert check.up is False
    check.refresh([web])  # the policy in b is gone
    assert check.up is True
