"""Policies as custom resources, through the official client against the kmock Kubernetes emulator:
read from the cluster (invalid ones skipped), status written only when it changes, reloaded."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import kmock
import pytest
from kubernetes import client

from actuator.policy_resources import GROUP, PLURAL, VERSION, ClusterPolicies, PolicyStatusWriter
from scaleahead.daemon import PolicyStatus


class Emulator:
    """kmock's KubernetesEmulator served on loopback from a background event loop."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.emu: Any = None
        self.url = ""
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with kmock.KubernetesEmulator() as emu, kmock.Server(emu) as srv:
            emu.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = {
                "kind": "PredictiveScalingPolicy",
                "namespaced": True,
                "subresources": ["status"],
            }
            self.emu, self.url = emu, str(srv.url).rstrip("/")
            self.ready.set()
            while not self.stop.is_set():
                await asyncio.sleep(0.02)

    def requests(self, method: str) -> list[Any]:
        return [r for r in list(self.emu._requests) if str(r.method).upper().endswith(method)]


@pytest.fixture
def cluster() -> Iterator[tuple[Emulator, Any]]:
    em = Emulator()
    em.thread.start()
    assert em.ready.wait(20), "the emulator started"
    cfg = client.Configuration()
    cfg.host = em.url
    api = client.ApiClient(cfg)
    yield em, api
    em.stop.set()
    em.thread.join(timeout=5)


def _cr(name: str, ns: str = "shop", **spec: Any) -> dict[str, Any]:
    body = {"target": {"name": name}, "demand": {"query": "sum(rate(x[1m]))"}, "capacityPerReplica": 2, **spec}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def test_policies_are_read_from_custom_resources_and_invalid_ones_are_skipped(cluster) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web", maxReplicas=30))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("bad", minReplicas=9, maxReplicas=3))
    source = ClusterPolicies(api)
    policies = source.load()
    assert [p.metadata.name for p in policies] == ["web"]
    assert policies[0].workload.key == "Deployment/shop/web", "the target namespace defaults to the object's"
    assert policies[0].spec.max_replicas == 30
    assert "minReplicas" in source.invalid["shop/bad"]


def _status(desired: int, t: float, reason: str = "forecast") -> PolicyStatus:
    return PolicyStatus(
        "web", "shop", "Deployment/shop/web", desired, 2, 12.5, "none", f"{reason} text", reason, t, "seasonal_naive"
    )


def test_status_is_written_to_the_subresource_only_when_it_changes(cluster) -> None:  # type: ignore[no-untyped-def]
    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    writer = PolicyStatusWriter(api, refresh_s=60.0)
    writer.publish([_status(4, 1000.0)])
    obj = co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")
    assert obj["status"]["desiredReplicas"] == 4
    assert obj["status"]["forecastPeak"] == 12.5
    assert obj["status"]["fallbackMode"] == "none"
    patches = len(em.requests("PATCH"))
    for t in (1010.0, 1020.0, 1030.0):  # same decision every 10 s: no writes
        writer.publish([_status(4, t)])
    assert len(em.requests("PATCH")) == patches
    writer.publish([_status(6, 1040.0)])  # a new decision: written at once
    assert len(em.requests("PATCH")) == patches + 1
    writer.publish([_status(6, 1105.0)])  # unchanged but older than refresh_s: refreshed
    assert len(em.requests("PATCH")) == patches + 2
    assert co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")["status"]["desiredReplicas"] == 6


def test_a_status_for_a_deleted_policy_does_not_stop_the_others(cluster) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    gone = PolicyStatus("gone", "shop", "Deployment/shop/gone", 1, 1, None, "current", "x", "x", 1.0, "m")
    writer = PolicyStatusWriter(api)
    writer.publish([gone, _status(3, 1.0)])
    assert co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")["status"]["desiredReplicas"] == 3


def test_the_daemon_reloads_policies_from_the_cluster_and_writes_their_status(cluster, daemon_factory) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web0", maxReplicas=60))
    source = ClusterPolicies(api)
    daemon, clock, _, _ = daemon_factory(
        n=1, policy_source=source.load, status_sink=PolicyStatusWriter(api), policy_reload_s=30.0
    )
    daemon.run(lambda: False, max_ticks=2)
    status = co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web0")["status"]
    assert status["desiredReplicas"] >= 1 and status["lastReason"]
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web1", maxReplicas=60))
    daemon.run(lambda: False, max_ticks=5)  # past the 30 s reload
    assert {p.metadata.name for p in daemon.deps.policies} == {"web0", "web1"}
    daemon.run(lambda: False, max_ticks=2)
    assert "status" in co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web1")
