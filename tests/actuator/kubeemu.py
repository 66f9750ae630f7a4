"""A Kubernetes API for the actuator tests: kmock's emulator on loopback, driven by the official client.

kmock's ``KubernetesEmulator`` stores objects and serves get/list/create/patch/delete. This file
adds what the actuator relies on and the emulator leaves to its users (its docs say: inherit and
implement): ``resourceVersion`` bumps with a 409 when a write's precondition is stale, the pod
eviction subresource with its UID precondition (409) and PodDisruptionBudget checks (429), and
injected faults (an HTTP status, a delay or a 200 answer that is not JSON, for N matching
requests). The server runs in a background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock
import pytest
from kmock._internal.k8s import KubernetesError
from kubernetes import client as k8s

DEPLOYMENTS = kmock.resource("apps", "v1", "deployments")
STATEFULSETS = kmock.resource("apps", "v1", "statefulsets")
HPAS = kmock.resource("autoscaling", "v2", "horizontalpodautoscalers")
KSVC = kmock.resource("serving.knative.dev", "v1", "services")
PODS = kmock.resource("", "v1", "pods")
PDBS = kmock.resource("policy", "v1", "poddisruptionbudgets")
LEASES = kmock.resource("coordination.k8s.io", "v1", "leases")
CONFIGMAPS = kmock.resource("", "v1", "configmaps")
QUOTAS = kmock.resource("", "v1", "resourcequotas")
LIMITRANGES = kmock.resource("", "v1", "limitranges")
RUNTIMECLASSES = kmock.resource("node.k8s.io", "v1", "runtimeclasses")
NODES = kmock.resource("", "v1", "nodes")
POD_METRICS = kmock.resource("metrics.k8s.io", "v1beta1", "pods")


@dataclass
class Fault:
    """Answer the next ``times`` requests whose method and path match with ``status`` (or a delay)."""

    method: str
    path_contains: str
    status: int = 500
    delay_s: float = 0.0
    times: int = 1
    after: bool = False  # delay after handling: the change lands, the answer comes too late
    html: str = ""  # answer 200 with this text/html body instead (an authenticating proxy's login page)
    message: str = ""  # the Status message of the answer (default: "injected <status>")
    skip: int = 0  # let this many matching requests through first (e.g. the read before a write)
    at_end: bool = False  # the path ends with path_contains (a list, not the GETs of its objects)

    def matches(self, method: str, path: str) -> bool:
        found = path.endswith(self.path_contains) if self.at_end else self.path_contains in path
        return method.upper() == self.method.upper() and found


@attrs.define(kw_only=True)
class Cluster(kmock.KubernetesEmulator):
    faults: list[Fault] = attrs.field(factory=list)
    rv: int = 100

    def declare(self) -> None:
        """Declare every resource the actuator uses, so that an empty list answers 200, as in Kubernetes."""
        for res in (DEPLOYMENTS, STATEFULSETS, HPAS, KSVC, PODS, PDBS, LEASES, CONFIGMAPS, QUOTAS, LIMITRANGES):
            self.resources[res] = kmock.ResourceInfo(namespaced=True)
        self.resources[NODES] = kmock.ResourceInfo(namespaced=False)
        self.resources[RUNTIMECLASSES] = kmock.ResourceInfo(namespaced=False)
        self.resources[POD_METRICS] = kmock.ResourceInfo(namespaced=True)

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        method, path = str(request.method.value), request.url.path
        for fault in list(self.faults):
            if fault.matches(method, path):
                if fault.skip > 0:
                    fault.skip -= 1
                    continue
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                if fault.html:
                    return aiohttp.web.Response(text=fault.html, content_type="text/html")
                if fault.delay_s and fault.after:
                    response = await self._serve(request)
                    await asyncio.sleep(fault.delay_s)
                    return response
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                    break
                message = fault.message or f"injected {fault.status}"
                raise KubernetesError(status=fault.status, reason="Injected", message=message)
        return await self._serve(request)

    async def _serve(self, request: Any) -> aiohttp.web.StreamResponse:
        method = str(request.method.value)
        if request.resource is not None and request.subresource == "eviction" and method == "POST":
            return self._evict(request)
        action = request.action
        if request.resource is not None and isinstance(request.data, dict):
            if action == kmock.action.UPDATE and request.name is not None:
                key = (request.resource, request.namespace, request.name)
                if key in self.objects and not self.objects[key].deleted:
                    current = (self.objects[key].get("metadata") or {}).get("resourceVersion")
                    wanted = (request.data.get("metadata") or {}).get("resourceVersion")
                    if wanted and current and wanted != current:
                        raise KubernetesError(
                            status=409,
                            reason="Conflict",
                            message="the object has been modified; please apply your changes to the latest version",
                        )
            if action in (kmock.action.UPDATE, kmock.action.CREATE):
                request.data.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
        return await super()._handle(request)

    def _evict(self, request: Any) -> aiohttp.web.StreamResponse:
        key = (PODS, request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            raise KubernetesError(status=404, reason="NotFound", message=f'pods "{request.name}" not found')
        body = request.data if isinstance(request.data, dict) else {}
        wanted = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        uid = (self.objects[key].get("metadata") or {}).get("uid")
        if wanted and wanted != uid:  # as the API server: a newer pod of the same name is not evicted
            raise KubernetesError(
                status=409,
                reason="Conflict",
                message=f'Operation cannot be fulfilled on pods "{request.name}": Precondition failed: '
                f"UID in precondition: {wanted}, UID in object meta: {uid or ''}",
            )
        labels = (self.objects[key].get("metadata") or {}).get("labels") or {}
        for (res, ns, name), pdb in list(self.objects.items()):
            if res != PDBS or ns != request.namespace or pdb.deleted:
                continue
            match = dict((pdb.get("spec") or {}).get("selector", {}).get("matchLabels") or {})
            if all(labels.get(k) == v for k, v in match.items()):
                allowed = int((pdb.get("status") or {}).get("disruptionsAllowed", 0))
                if allowed < 1:
                    raise KubernetesError(
                        status=429,
                        reason="TooManyRequests",
                        message="Cannot evict pod as it would violate the pod's disruption budget.",
                    )
                pdb.patch({"status": {"disruptionsAllowed": allowed - 1}})
        self.objects[key].delete()
        return aiohttp.web.json_response(
            {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}, status=201
        )

    # -- helpers for tests ------------------------------------------------------------------
    def put(self, resource: Any, namespace: str, name: str, body: dict[str, Any]) -> None:
        meta = {"name": name, "namespace": namespace, "resourceVersion": self._next_rv()}
        meta |= body.pop("metadata", {})
        self.objects[resource, namespace, name] = {"metadata": meta, **body}

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        key = (resource, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return dict(self.objects[key].raw)

    def edit(self, resource: Any, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A change by someone else (kubectl): new resourceVersion."""
        patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": self._next_rv()}}
        self.objects[resource, namespace, name].patch(patch)

    def calls(self) -> list[tuple[str, str]]:
        return [(str(r.method.value), r.url.path) for r in list(self)]

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.calls() if m not in ("GET", "HEAD")]


@dataclass
class Running:
    cluster: Cluster
    url: str
    loop: asyncio.AbstractEventLoop

    def api_client(self) -> Any:
        cfg = k8s.Configuration()
        cfg.host = self.url.rstrip("/")
        cfg.retries = 0
        return k8s.ApiClient(cfg)


@pytest.fixture
def kube() -> Iterator[Running]:
    """A fresh emulated cluster on a loopback port, served from a background thread."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop

        async def main() -> None:
            async with Cluster() as cluster, kmock.Server(cluster) as server:
                cluster.declare()
                box["cluster"], box["url"] = cluster, str(server.url)
                box["stop"] = asyncio.Event()
                ready.set()
                await box["stop"].wait()

        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "the emulator did not start"
    running = Running(box["cluster"], box["url"], box["loop"])
    try:
        yield running
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)


def deployment(replicas: int, ready: int | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = labels or {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
        "status": {"replicas": replicas, "readyReplicas": replicas if ready is None else ready},
    }


def policy(
    name: str = "web",
    kind: str = "Deployment",
    mode: str = "direct",
    hpa: str | None = None,
    min_replicas: int = 1,
    max_replicas: int = 20,
    max_step_up: int = 100,
    max_step_down: int = 100,
    warm_max: int = 5,
) -> Any:
    from scaleahead.policy import Policy

    target: dict[str, Any] = {"kind": kind, "namespace": "default", "name": name, "mode": mode}
    if hpa:
        target["hpaName"] = hpa
    return Policy.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "target": target,
                "demand": {"query": "rate(x[1m])"},
                "capacityPerReplica": 10,
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "maxStepUp": max_step_up,
                "maxStepDown": max_step_down,
                "warmPool": {"enabled": kind == "KnativeService", "maxInstances": warm_max},
            },
        }
    )
