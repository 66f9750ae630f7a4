"""The emulator's ``latency_s`` (``bench control-plane --api-latency-ms``): every answer waits, an
error answer too (a review found 404 and 409 answers coming back at once), and a lookup by key
answers as kmock's scan did."""

from __future__ import annotations

import time

import pytest
from kubeemu import DEPLOYMENTS, deployment
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException


def test_every_answer_waits_the_latency_errors_included(kube) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(DEPLOYMENTS, "default", "x", deployment(2))
    kube.cluster.latency_s = 0.3
    apps = k8s.AppsV1Api(kube.api_client())
    t0 = time.monotonic()
    assert apps.read_namespaced_deployment_scale("x", "default").spec.replicas == 2
    ok = time.monotonic() - t0
    t0 = time.monotonic()
    with pytest.raises(ApiException) as missing:
        apps.read_namespaced_deployment_scale("missing", "default")
    gone = time.monotonic() - t0
    t0 = time.monotonic()
    with pytest.raises(ApiException) as stale:
        apps.patch_namespaced_deployment_scale(
            "x", "default", {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 3}}
        )
    conflict = time.monotonic() - t0
    assert (missing.value.status, stale.value.status) == (404, 409)
    assert min(ok, gone, conflict) >= 0.3, (ok, gone, conflict)


def test_a_deleted_object_is_not_found_by_its_key(kube) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(DEPLOYMENTS, "default", "x", deployment(2))
    apps = k8s.AppsV1Api(kube.api_client())
    apps.delete_namespaced_deployment("x", "default")
    with pytest.raises(ApiException) as gone:
        apps.read_namespaced_deployment("x", "default")
    assert gone.value.status == 404
