"""A Kubernetes API emulator: kmock's emulator on loopback, driven by the official client.

Used by the actuator tests (``tests/actuator/kubeemu.py`` re-exports it and adds the ``kube``
fixture) and by ``scaleahead bench control-plane``, which runs it in its own process
(``python -m scaleahead.bench.kubeemu``, see ``main``). ``kmock`` is in the ``dev`` extra only:
importing this module without it raises ``ImportError`` (the bench command says what to install).

kmock's ``KubernetesEmulator`` stores objects and serves get/list/create/patch/delete. This file
adds what the actuator relies on and the emulator leaves to its users (its docs say: inherit and
implement): ``resourceVersion`` bumps with a 409 when a write's precondition is stale, the pod
eviction subresource with its UID precondition (409) and PodDisruptionBudget checks (429), lists
paged by ``limit`` with ``continue`` and ``remainingItemCount`` (kmock answers every object at once), and
injected faults (an HTTP status, a delay or a 200 answer that is not JSON, for N matching
requests). The server runs in a background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock
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
    #: Answer with a ``Retry-After`` header of this many seconds and the Status'
    #: ``details.retryAfterSeconds``, as the API server's throttling 429 does (None: neither).
    retry_after: int | None = None

    def matches(self, method: str, path: str) -> bool:
        found = path.endswith(self.path_contains) if self.at_end else self.path_contains in path
        return method.upper() == self.method.upper() and found


def _pdb_selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """policy/v1's rule, written here apart from the code under test: a null selector selects no
    pod, the empty one every pod of the namespace; ``matchLabels`` and ``matchExpressions`` AND."""
    if not isinstance(selector, Mapping):  # a stored object's fields are Mappings, not dicts
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)
        if not ok:
            return False
    return True


@attrs.define(kw_only=True)
class Cluster(kmock.KubernetesEmulator):
    faults: list[Fault] = attrs.field(factory=list)
    rv: int = 100
    #: Keep every request for ``calls()`` (the tests). kmock matches each request against all those
    #: kept (``request in payload._source`` scans them): a long benchmark run turns that into
    #: seconds per request, so ``scaleahead bench control-plane`` keeps only the current one.
    keep_requests: bool = True
    #: Every answer waits this long (s) after the request is served, without using CPU: the network
    #: round trip and etcd commit a real API server spends waiting (``bench control-plane --api-latency-ms``).
    latency_s: float = 0.0

    def declare(self) -> None:
        """Declare every resource the actuator uses, so that an empty list answers 200, as in Kubernetes."""
        for res in (DEPLOYMENTS, STATEFULSETS, HPAS, KSVC, PODS, PDBS, LEASES, CONFIGMAPS, QUOTAS, LIMITRANGES):
            self.resources[res] = kmock.ResourceInfo(namespaced=True)
        self.resources[NODES] = kmock.ResourceInfo(namespaced=False)
        self.resources[RUNTIMECLASSES] = kmock.ResourceInfo(namespaced=False)
        self.resources[POD_METRICS] = kmock.ResourceInfo(namespaced=True)

    def _KubernetesEmulator__get_objs(self, request: Any, strict: bool) -> list[Any]:  # noqa: N802 - kmock's private name
        """kmock's lookup of the objects a request names, by key when it names one object: kmock scans
        every object for each request, about 40 ms at 10,000 workloads (30,000 objects), which made
        ``bench control-plane`` measure the emulator. A key it does not find (another spelling of the
        resource) falls back to kmock's scan."""
        if strict and request.name is not None and request.resource is not None:
            found = self._objects._objects.get((request.resource, request.namespace, request.name))
            if found is not None:
                return [found]
        return super()._KubernetesEmulator__get_objs(request, strict)  # type: ignore[misc, no-any-return]

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        if not self.keep_requests:
            del self._requests[:-1]  # this request is the last one kept
        method, path = str(request.method.value), request.url.path
        if self.latency_s > 0:
            # served first, then the wait: kmock finds a request among those it keeps, and without
            # ``keep_requests`` a request arriving during the wait would drop this one from them
            try:
                return await self._handle_now(request, method, path)
            finally:  # an error answer (404, 409, a fault) waits as long
                await asyncio.sleep(self.latency_s)
        return await self._handle_now(request, method, path)

    async def _handle_now(self, request: Any, method: str, path: str) -> aiohttp.web.StreamResponse:
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
                if fault.retry_after is not None:
                    status = {
                        "apiVersion": "v1",
                        "kind": "Status",
                        "metadata": {},
                        "status": "Failure",
                        "message": message,
                        "reason": "TooManyRequests",
                        "details": {"retryAfterSeconds": fault.retry_after},
                        "code": fault.status,
                    }
                    headers = {"Retry-After": str(fault.retry_after)}
                    return aiohttp.web.json_response(status, status=fault.status, headers=headers)
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

    async def _serve_list(self, request: Any) -> Any:
        """kmock's list, paged as the API server pages it: with ``limit``, at most that many objects in
        name order, ``metadata.continue`` (a token for the rest) and ``metadata.remainingItemCount``
        (how many objects the following pages hold) while more remain."""
        answer = await super()._serve_list(request)
        params = getattr(request, "params", None) or {}
        try:
            limit = int(params.get("limit") or 0)
        except ValueError:
            raise KubernetesError(status=400, reason="BadRequest", message="limit must be an integer") from None
        token = str(params.get("continue") or "")
        if limit <= 0 or not isinstance(answer, dict):
            return answer
        items = sorted(answer.get("items") or [], key=lambda o: str((o.get("metadata") or {}).get("name") or ""))
        start = ""
        if token:
            try:
                start = str(json.loads(base64.b64decode(token, validate=True))["start"])
            except (ValueError, KeyError, TypeError):
                raise KubernetesError(
                    status=400, reason="BadRequest", message="continue key is not valid: malformed token"
                ) from None
            items = [o for o in items if str((o.get("metadata") or {}).get("name") or "") > start]
        page, rest = items[:limit], items[limit:]
        meta = dict(answer.get("metadata") or {})
        if rest:
            last = str((page[-1].get("metadata") or {}).get("name") or "")
            meta["continue"] = base64.b64encode(json.dumps({"start": last}).encode()).decode()
            meta["remainingItemCount"] = len(rest)
        return {**answer, "metadata": meta, "items": page}

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
        budgets = [
            pdb
            for (res, ns, _name), pdb in list(self.objects.items())
            if res == PDBS
            and ns == request.namespace
            and not pdb.deleted
            and _pdb_selects((pdb.get("spec") or {}).get("selector"), labels)
        ]
        if len(budgets) > 1:  # as the API server's eviction REST handler answers
            raise KubernetesError(
                status=500,
                reason="InternalError",
                message="This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                "support.",
            )
        for pdb in budgets:
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
    def put(self, resource: Any, namespace: str, name: str, body: dict[str, Any]) -> None:  # type: ignore[override]
        meta = {"name": name, "namespace": namespace, "resourceVersion": self._next_rv()}
        meta |= body.pop("metadata", {})
        self.objects[resource, namespace, name] = {"metadata": meta, **body}

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:  # type: ignore[override]
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


# -- a cluster of many objects in its own process (``scaleahead bench control-plane``) ----------
def populate(cluster: Cluster, workloads: int, namespaces: int, quotas: bool = True) -> None:
    """``workloads`` Deployments ``w{i}`` (2 replicas, requests 100m / 64Mi), a
    PredictiveScalingPolicy ``p{i}`` for each (direct mode) and as many HPAs ``h{i}`` on other
    workloads (none conflicts: every policy is accepted), in namespaces ``ns{i % namespaces}``;
    with ``quotas``, one roomy ResourceQuota and one LimitRange per namespace."""
    from actuator.policy_resources import GROUP, PLURAL, VERSION
    from scaleahead.policy import KIND

    policies = kmock.resource(GROUP, VERSION, PLURAL)
    cluster.declare()
    cluster.resources[policies] = kmock.ResourceInfo(namespaced=True, kind=KIND, subresources=["status"])
    for i in range(workloads):
        ns = f"ns{i % namespaces}"
        stamp = f"2026-01-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"
        spec = {
            "target": {"kind": "Deployment", "name": f"w{i}", "mode": "direct"},
            "demand": {"query": f'rate(x{{ns="{ns}"}}[1m])'},
            "capacityPerReplica": 10,
            "minReplicas": 1,
            "maxReplicas": 1000,
            "maxStepUp": 1000,
            "maxStepDown": 1000,
        }
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"creationTimestamp": stamp}}
        cluster.put(policies, ns, f"p{i}", {**body, "spec": spec})
        target = {"kind": "Deployment", "name": f"other{i}", "apiVersion": "apps/v1"}
        hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"}
        cluster.put(HPAS, ns, f"h{i}", {**hpa, "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 10}})
        d = deployment(2, labels={"app": f"w{i}"})
        d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
        cluster.put(DEPLOYMENTS, ns, f"w{i}", d)
    if not quotas:
        return
    hard = {"pods": "1000000", "requests.cpu": "1000000", "requests.memory": "100000Gi"}
    for j in range(min(namespaces, workloads)):
        quota = {"hard": hard, "used": {"pods": "10", "requests.cpu": "1", "requests.memory": "1Gi"}}
        cluster.put(
            QUOTAS,
            f"ns{j}",
            "q",
            {"apiVersion": "v1", "kind": "ResourceQuota", "spec": {"hard": hard}, "status": quota},
        )
        limits = {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}
        cluster.put(LIMITRANGES, f"ns{j}", "lr", {"apiVersion": "v1", "kind": "LimitRange", "spec": limits})


async def _serve_populated(spec: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    latency_s = float(spec.get("latency_s", 0.0))
    async with Cluster(keep_requests=False, latency_s=latency_s) as cluster, kmock.Server(cluster) as server:
        populate(cluster, int(spec["workloads"]), int(spec["namespaces"]), bool(spec.get("quotas", True)))
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        # the parent holds our stdin open: when it goes (even killed), we go too
        def parent_gone() -> None:
            if not os.read(sys.stdin.fileno(), 4096):
                stop.set()

        loop.add_reader(sys.stdin.fileno(), parent_gone)
        print(json.dumps({"url": str(server.url)}), flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """``python -m scaleahead.bench.kubeemu '{"workloads": N, "namespaces": M, "quotas": true, "latency_s": 0}'``:
    serve a populated emulator on loopback, print ``{"url": ...}`` on one line once it answers,
    and stop on SIGTERM, SIGINT or when stdin closes (the parent is gone)."""
    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    asyncio.run(_serve_populated(spec))


if __name__ == "__main__":
    main()
