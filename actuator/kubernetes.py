"""The Kubernetes target: the one module that talks to the API server (official ``kubernetes`` client).

What each action changes (docs/actuator.md has the RBAC table):

- ``ScaleTo`` on a Deployment or StatefulSet, mode ``direct``: ``spec.replicas`` through the
  ``scale`` subresource; mode ``floor``: ``spec.minReplicas`` of the HPA named by the policy.
- ``ScaleTo`` / ``SetWarmPool`` on a ``KnativeService``: the ``autoscaling.knative.dev/min-scale``
  annotation of the Service's revision template (warm instances), or its older spelling
  ``autoscaling.knative.dev/minScale`` where the template uses that one (both: skipped).
- ``ScaleTo`` / ``SetWarmPool`` on kind ``Headroom``: the replicas of a placeholder Deployment of
  pause pods at a low PriorityClass (the cluster-autoscaler over-provisioning pattern); the
  Deployment is created on first use.
- ``MovePod``: the Eviction API (a PodDisruptionBudget refusing answers 429: the move is skipped);
  a bare pod (no controller) is re-created bound to the planned node; the replacement of a
  ReplicaSet/StatefulSet pod is steered to the planned node by the admission webhook of
  ``actuator.steering`` (the ``Actuator`` records the steer before the eviction).

Every write carries the ``resourceVersion`` read just before (a merge patch with
``metadata.resourceVersion`` is a precondition: 409 if the object changed). Reads use the raw
JSON so that an object of an unexpected shape is reported, naming the field, instead of crashing.

``read_state`` also reports each Deployment's and StatefulSet's observed readiness times (its
pods, found through its selector: the Ready condition's ``lastTransitionTime`` minus the pod's
``creationTimestamp``, for pods created in the last ``sample_window_s`` whose containers never
restarted, with each pod's UID), from which the control loop learns the start-up delay
(``planner.startup``; ``scaleahead.loop.StartupBook`` keeps each pod's first one beyond the
window). One pod list per namespace per read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from actuator.api_status import retry_after, status_message
from actuator.base import FIELD_MANAGER, PDB_FACT, ActionResult, ActuationError, LiveObject
from actuator.limit_ranges import Defaults, container_defaults, with_defaults
from actuator.quota_scopes import quota_applies
from actuator.steering import STEERED_TO, controller_owner
from scaleahead.clock import Clock, SystemClock
from scaleahead.policy import Policy
from scaleahead.types import (
    DEFAULT_MAX_PODS,
    Action,
    ClusterState,
    HostPort,
    LabelRequirement,
    LabelSelector,
    MovePod,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    ScaleTo,
    SetWarmPool,
    Taint,
    Toleration,
    WorkloadRef,
    WorkloadState,
)

MIN_SCALE = "autoscaling.knative.dev/min-scale"
#: The older spelling of ``MIN_SCALE``, which Knative still accepts (since Knative 1.1 it looks the
#: key up as ``min-scale``, then ``minScale``; many manifests and older docs use this one).
MIN_SCALE_OLD = "autoscaling.knative.dev/minScale"
#: The label Knative puts on every pod of a Service's revisions: the Service's name.
KNATIVE_SERVICE_LABEL = "serving.knative.dev/service"
#: Pod label naming its interference class for rebalancing (cpu-bound, io-bound, latency-critical).
INTERFERENCE_LABEL = "scaleahead.io/interference"
_INTERFERENCE = ("cpu-bound", "io-bound", "latency-critical")
#: The taint that fences a node being drained (``KubernetesTarget.fence_node``): ``NoSchedule``, so
#: that no new pod is scheduled there while its pods move off and the cluster autoscaler removes
#: it; only scaleahead sets or lifts it. The annotation says until when (RFC 3339, UTC).
DRAIN_FENCE_TAINT = "scaleahead.io/draining"
DRAIN_FENCE_UNTIL = "scaleahead.io/draining-until"
#: How long after a failed node list ``lift_expired_fences`` lists the nodes again (s).
FENCE_READ_RETRY_S = 600.0
_MEMORY_UNITS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
}  # fmt: skip


def _utc(t: float) -> str:
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):  # beyond the calendar's years: said as a number
        return f"{t:.0f} s since 1970"


def fence_until(value: Any) -> float:
    """A drain fence's ``DRAIN_FENCE_UNTIL`` annotation as a time; 0 (over at once) when it is
    missing or not an RFC 3339 time: a fence nobody can tell the end of is lifted."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        t = at.timestamp() if at.tzinfo is not None else 0.0
    except (ValueError, OverflowError, OSError):
        return 0.0
    return max(0.0, t)  # before 1970: over long ago


def node_fence(node: Mapping[str, Any]) -> float | None:
    """Until when a Node is fenced for its drain (``fence_until`` of its annotation), None when it
    carries no ``DRAIN_FENCE_TAINT``."""
    if not any(t.key == DRAIN_FENCE_TAINT for t in node_taints(node)):
        return None
    return fence_until(((node.get("metadata") or {}).get("annotations") or {}).get(DRAIN_FENCE_UNTIL))


def node_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """A Node's ``spec.taints``."""
    taints = (node.get("spec") or {}).get("taints") or []
    return tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in taints
        if isinstance(t, Mapping)
    )


def pod_tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """A pod's ``spec.tolerations``, without those that set ``tolerationSeconds``.

    Such a toleration (always ``NoExecute``: the API refuses it on another effect; the
    DefaultTolerationSeconds admission adds two, for ``not-ready`` and ``unreachable``) lets the pod
    stay on a tainted node only that long: a pod moved there would be evicted again, so the
    rebalancer does not count it.
    """
    return tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or []
        if isinstance(t, Mapping) and t.get("tolerationSeconds") is None
    )


def _requirements(items: Any, field: bool) -> NodeSelectorTerm:
    return tuple(
        NodeSelectorRequirement(
            str(r.get("key") or ""), str(r.get("operator") or ""), tuple(str(v) for v in r.get("values") or ()), field
        )
        for r in items or []
        if isinstance(r, Mapping)
    )


def required_node_terms(pod: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """A pod's required node affinity: its ``nodeSelectorTerms``, each as its ``matchExpressions``
    (on labels) and ``matchFields`` requirements; () when it has none.

    A pod the steering webhook pinned (annotation ``scaleahead.io/steered-to: N``) carries
    ``matchFields metadata.name In [N]`` in every term, which its owner's template does not: that
    requirement is left out (and a term that held only it, the one the webhook added to a pod with
    no required node affinity), so the pod may be moved again like its owner's other pods.
    """
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    steered = (meta.get("annotations") or {}).get(STEERED_TO)
    steer = NodeSelectorRequirement("metadata.name", "In", (str(steered),), True) if steered else None
    out = []
    for term in required.get("nodeSelectorTerms") or []:
        if not isinstance(term, Mapping):
            continue
        reqs = _requirements(term.get("matchExpressions"), False) + _requirements(term.get("matchFields"), True)
        kept = tuple(r for r in reqs if r != steer)
        if kept or kept == reqs:  # a term of the steer alone goes; an empty term stays (it matches no node)
            out.append(kept)
    return tuple(out)


def label_selector(raw: Any) -> LabelSelector | None:
    """A ``labelSelector`` (``matchLabels`` and ``matchExpressions``); None when there is none.

    ``{}`` is the empty selector, which selects every pod; None selects none (a pod anti-affinity
    term without one; a PodDisruptionBudget without one, in policy/v1).
    """
    if not isinstance(raw, Mapping):
        return None
    labels = raw.get("matchLabels") or {}
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(labels, Mapping) else (),
        tuple(
            LabelRequirement(str(e.get("key") or ""), str(e.get("operator") or ""), _strings(e.get("values")))
            for e in raw.get("matchExpressions") or []
            if isinstance(e, Mapping)
        ),
    )


def _strings(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values or [])


def anti_affinity_terms(spec: Mapping[str, Any]) -> tuple[PodAffinityTerm, ...]:
    """A pod's required pod anti-affinity, term by term, with its ``topologyKey``.

    A term's pods are those of the namespaces it lists, else of the pod's own namespace; a term
    with a ``namespaceSelector`` is read as selecting every namespace (namespaces' labels are not
    read; selecting more only keeps more pods apart).
    """
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    return tuple(
        PodAffinityTerm(
            label_selector(term.get("labelSelector")),
            None if term.get("namespaceSelector") is not None else _strings(term.get("namespaces")),
            str(term.get("topologyKey") or ""),
        )
        for term in anti
        if isinstance(term, Mapping)
    )


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod's containers bind (init containers too: a sidecar keeps its ports)."""
    out = []
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        for port in (c.get("ports") or []) if isinstance(c, Mapping) else []:
            number = int(port.get("hostPort") or 0) if isinstance(port, Mapping) else 0
            if number > 0:
                out.append(HostPort(number, str(port.get("protocol") or "TCP"), str(port.get("hostIP") or "")))
    return tuple(out)


def _memory_bytes(quantity: Any) -> float:
    """A memory quantity in bytes (any suffix of the Kubernetes format); missing: 0."""
    if quantity is None or quantity == "":
        return 0.0
    text = str(quantity)
    try:
        for unit in sorted(_MEMORY_UNITS, key=len, reverse=True):
            if text.endswith(unit):
                return float(text[: -len(unit)]) * _MEMORY_UNITS[unit]
        return float(text)
    except ValueError:  # "1Pi", "2E", "500m" (bytes can be milli too), ...
        return float(_parse_quantity(text))


def _effective(spec: Mapping[str, Any], one: Callable[[Mapping[str, Any]], float]) -> float:
    """One resource of a pod as kube-scheduler counts it (``resource.PodRequests``): the containers'
    sum plus the sidecars' (init containers with ``restartPolicy: Always``), at least any other init
    container plus the sidecars started before it, at least the pod-level request, plus the
    pod's overhead."""
    total = sum(one(c) for c in spec.get("containers") or [])
    sidecars = peak = 0.0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            total += one(c)
            sidecars += one(c)
            peak = max(peak, sidecars)
        else:
            peak = max(peak, one(c) + sidecars)
    pod_level = one(spec)  # spec.resources (PodLevelResources), where the pod sets one
    overhead = spec.get("overhead") or {}  # counted in requests and limits alike
    return max(total, peak, pod_level) + one({"resources": {"requests": overhead, "limits": overhead}})


def _request(resource: str) -> Callable[[Mapping[str, Any]], Any]:
    """A container's (or a pod's ``spec.resources``) request of ``resource``, else its limit (the API
    defaults the request to the limit)."""

    def get(c: Mapping[str, Any]) -> Any:
        r = c.get("resources") or {}
        value = (r.get("requests") or {}).get(resource)
        return (r.get("limits") or {}).get(resource) if value in (None, "") else value

    return get


def pod_requests(spec: Mapping[str, Any]) -> tuple[int, int]:
    """A running pod's CPU (m) and memory (MiB, rounded up) requests as kube-scheduler counts them
    against a node's allocatable (``_effective``)."""
    cpu, mem = _request("cpu"), _request("memory")
    return (
        int(_effective(spec, lambda c: cpu_millis(cpu(c)))),
        math.ceil(_effective(spec, lambda c: _memory_bytes(mem(c))) / 2**20),
    )


def pod_ephemeral_storage_mb(spec: Mapping[str, Any]) -> int:
    """A running pod's ``ephemeral-storage`` request (MiB, rounded up) as kube-scheduler counts it
    against a node's allocatable (``_effective``, as memory: a container's limit where it sets no
    request); 0 when it requests none."""
    storage = _request("ephemeral-storage")
    return math.ceil(_effective(spec, lambda c: _memory_bytes(storage(c))) / 2**20)


#: Volume types that tie a pod to no node or zone and that no scheduler filter reads: their data
#: comes from the API server, lives and dies with the pod, or is a network share.
MOVABLE_VOLUMES = frozenset({"configMap", "secret", "downwardAPI", "projected", "emptyDir", "nfs", "image"})
#: Resources of a pod the planner weighs against a node's allocatable.
MODELLED_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _asks_for_some(quantity: Any) -> bool:
    """Whether a resource quantity is above zero: ``""``, ``"0"``, ``"0Mi"``, ``"0.0"`` are not;
    one that is no quantity is counted as one (the API server would not have taken it)."""
    if quantity is None or str(quantity).strip() == "":
        return False
    try:
        return bool(_parse_quantity(str(quantity)) != 0)
    except ValueError:
        return True


def unmovable_reason(item: Mapping[str, Any]) -> str:
    """Why the rebalancer must not move this pod (a sentence), or ``""``: a rule or state of it the
    planner does not model, so that the scheduler could refuse its replacement on the planned node
    (or the move makes no sense).

    Not modelled: required pod affinity; a topology spread constraint that does not schedule when
    unsatisfiable (``DoNotSchedule``, also when unset); a volume of a type that may bind the pod to
    a node or zone (anything but ``MOVABLE_VOLUMES``: a PersistentVolumeClaim, hostPath, an
    ephemeral volume, a CSI or cloud disk); a request (or limit) above zero of a resource other
    than CPU, memory and ephemeral storage (hugepages, extended resources such as GPUs); devices
    claimed through ``spec.resourceClaims``; a scheduler other than the default one. Also a pod
    that is not running yet or is terminating.
    """
    meta, spec = item.get("metadata") or {}, item.get("spec") or {}
    if meta.get("deletionTimestamp"):
        return "it is terminating"
    phase = (item.get("status") or {}).get("phase", "Running")
    if phase != "Running":
        return f"it is not running (phase {phase})"
    found = []
    affinity = spec.get("affinity") or {}
    if (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
        found.append("has required pod affinity")
    if any(
        isinstance(c, Mapping) and c.get("whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway"
        for c in spec.get("topologySpreadConstraints") or []
    ):
        found.append("has a topology spread constraint with whenUnsatisfiable DoNotSchedule")
    kinds = sorted(
        {k for v in spec.get("volumes") or [] if isinstance(v, Mapping) for k in v if k != "name"} - MOVABLE_VOLUMES
    )
    if kinds:
        found.append(f"mounts {'a volume' if len(kinds) == 1 else 'volumes'} of type {_listed(kinds)}")
    others = sorted(
        {
            str(k)
            for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()), spec)
            if isinstance(c, Mapping)
            for kind in ("requests", "limits")
            for k, v in ((c.get("resources") or {}).get(kind) or {}).items()
            if k not in MODELLED_RESOURCES and _asks_for_some(v)
        }
        | {str(k) for k, v in (spec.get("overhead") or {}).items() if k not in MODELLED_RESOURCES and _asks_for_some(v)}
    )
    if others:
        found.append(f"requests {_listed(others)}")
    if spec.get("resourceClaims"):
        found.append("claims devices (spec.resourceClaims)")
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", "default-scheduler"):
        found.append(f"is scheduled by {scheduler}, not the default scheduler")
    if not found:
        return ""
    return (
        f"it {_listed(found)}, which the planner does not model: the scheduler could refuse its replacement "
        "on the planned node"
    )


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def pod_limit(quantity: Any) -> int:
    """A node's ``status.allocatable.pods``, a Kubernetes quantity (``"110"``; a kubelet with
    maxPods 1000 reports ``"1k"``) read as the scheduler does (``Quantity.Value()``: rounded up):
    the kubelet's default 110 when it reports none, 0 (it receives no pod) when it reports one that
    is not a quantity."""
    if quantity is None or quantity == "":
        return DEFAULT_MAX_PODS
    try:
        return max(0, int(math.ceil(_parse_quantity(str(quantity)))))
    except ValueError:
        return 0


def cpu_millis(quantity: Any) -> int:
    """A CPU quantity (``"250m"``, ``"2"``, ``"1.5"``, ``2``; the metrics API's ``"123456789n"`` and
    ``"5000u"``) in millicores; missing: 0."""
    if quantity is None or quantity == "":
        return 0
    text = str(quantity)
    try:
        for suffix, per_milli in (("n", 1e6), ("u", 1e3), ("m", 1.0)):
            if text.endswith(suffix):
                return int(float(text[: -len(suffix)]) / per_milli)
        return int(round(float(text) * 1000))
    except ValueError:  # another suffix of the Kubernetes quantity format ("2k", "1E3" is a number above)
        return int(round(_parse_quantity(text) * 1000))


def memory_mb(quantity: Any) -> int:
    """A memory quantity (``"512Mi"``, ``"1G"``, ``"1073741824"``) in MiB; missing: 0."""
    return int(_memory_bytes(quantity) / 2**20)


def _parse_quantity(text: str) -> Any:
    """A Kubernetes quantity (any suffix: ``n u m k M G T P E``, ``Ki ... Ei``, ``e3``) as a Decimal,
    by the official client's parser; a ValueError that names the quantity when it is none."""
    from kubernetes.utils import parse_quantity

    try:
        return parse_quantity(text)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity ({exc})") from exc


#: ResourceQuota keys on what a pod of a workload asks for: key -> (requests|limits, cpu|memory).
#: ``cpu`` and ``memory`` mean the requests (Kubernetes' own shorthand).
_RESOURCE_QUOTA_KEYS = {
    "cpu": "requests.cpu",
    "requests.cpu": "requests.cpu",
    "memory": "requests.memory",
    "requests.memory": "requests.memory",
    "limits.cpu": "limits.cpu",
    "limits.memory": "limits.memory",
}


def _rooms(rq: Mapping[str, Any]) -> dict[str, int]:
    """What one ResourceQuota leaves, ``hard - used`` per normalized key (``pods``, ``requests.cpu``
    in millicores, ``requests.memory`` in MiB, ...; negative when over its limit). Keys it does not
    know and values it cannot read are left out."""
    hard = (rq.get("status") or {}).get("hard") or (rq.get("spec") or {}).get("hard") or {}
    used = (rq.get("status") or {}).get("used") or {}
    out: dict[str, int] = {}
    for key, limit in hard.items():
        norm = "pods" if key in ("pods", "count/pods") else _RESOURCE_QUOTA_KEYS.get(key)
        if norm is None:
            continue
        try:
            if norm == "pods":
                room = int(limit) - int(used.get(key, 0))
            elif norm.endswith("memory"):  # in bytes, rounded down once: each side floored could give 1 MiB too many
                room = math.floor((_memory_bytes(limit) - _memory_bytes(used.get(key, 0))) / 2**20)
            else:
                room = _quantity(norm, limit) - _quantity(norm, used.get(key, 0))
        except (TypeError, ValueError):
            continue
        out[norm] = min(out.get(norm, room), room)
    return out


def _quantity(resource: str, value: Any) -> int:
    """A quota or container quantity in millicores (cpu) or MiB (memory)."""
    return cpu_millis(value) if resource.endswith("cpu") else memory_mb(value)


#: What the new pods of a template are taken to tolerate (``template_rules``): every taint.
TOLERATE_ALL = (Toleration("", "Exists", "", ""),)


def template_rules(ref: WorkloadRef, template: Mapping[str, Any]) -> Pod:
    """The node rules of a workload's pod template (node selector, required node affinity) as a
    ``Pod`` on no node: where its new pods may land (``ClusterState.pod_rules``; their requests are
    ``pod_shape``'s). Not its tolerations: admission adds some to the pods it creates (an extended
    resource's, ExtendedResourceToleration; a namespace's defaults; webhooks), so the template's
    own would keep its pods off nodes they do land on (a GPU workload's off every GPU node: no
    room for it anywhere, so no move would ever be held for it). Its pods are taken to tolerate
    every taint (a review of 2026-12-07)."""
    spec = template.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"{ref.key}: spec.template.spec is not an object")
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise ValueError(f"{ref.key}: spec.template.spec.nodeSelector is not an object")
    return Pod(
        ref.namespace,
        "",
        "",
        0,
        0,
        owner=ref.name,
        node_selector={str(k): str(v) for k, v in selector.items()},
        required_node_terms=required_node_terms(template),
        tolerations=TOLERATE_ALL,
    )


def pod_shape(template: Mapping[str, Any]) -> dict[str, int]:
    """What one pod of a pod template counts against ResourceQuotas: ``requests.cpu`` (m),
    ``requests.memory`` (MiB, rounded up), ``limits.cpu``, ``limits.memory``, as the API server's
    quota evaluator counts a pod (``resourcehelper.PodRequests`` / ``PodLimits``): the containers'
    sum plus native sidecars (init containers with ``restartPolicy: Always``), at least any other
    init container with the sidecars started before it (``_effective``); a pod-level
    ``spec.resources`` in place of that (the API server validates it is no smaller for requests);
    plus the pod's ``overhead`` (on limits only where some limit is set). A container's request
    defaults to its limit; a limit is counted only where one is set. What admission adds is not
    in a template is added by ``KubernetesTarget._as_admitted``: the namespace's LimitRange
    defaults (``actuator.limit_ranges.with_defaults``) and the RuntimeClass's overhead."""
    spec = template.get("spec") or {}
    no_overhead = {k: v for k, v in spec.items() if k not in ("overhead", "resources")}
    overhead = spec.get("overhead") or {}
    pod_level = spec.get("resources") or {}
    out: dict[str, int] = {}
    for kind in ("requests", "limits"):
        for res in ("cpu", "memory"):

            def amount(value: Any, res: str = res) -> float:
                return cpu_millis(value) if res == "cpu" else _memory_bytes(value) / 2**20

            def one(c: Mapping[str, Any], kind: str = kind, res: str = res) -> float:
                r = c.get("resources") or {}
                value = (r.get(kind) or {}).get(res)
                if value in (None, "") and kind == "requests":
                    value = (r.get("limits") or {}).get(res)
                return amount(value)

            total = _effective(no_overhead, one)
            level = one({"resources": pod_level})
            if level > 0:
                total = level if kind == "limits" else max(total, level)
            if kind == "requests" or total > 0:
                total += amount(overhead.get(res))
            out[f"{kind}.{res}"] = math.ceil(total)
    return out


def unset_resources(template: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """The quota keys (``requests.cpu``, ``limits.memory``, ...) that some container or init container
    of ``template`` (as admitted: LimitRange defaults filled in) leaves unset. A ResourceQuota that
    constrains such a key refuses the pod ("must specify requests.cpu": the quota evaluator's
    ``Constraints``); a request counts as set where the container sets the limit (the API's
    defaulting). Sorted."""
    spec = template.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    out: list[str] = []
    for key in keys:
        kind, _, res = key.partition(".")
        for c in containers:
            r = c.get("resources") or {}
            value = (r.get(kind) or {}).get(res)
            if value in (None, "") and kind == "requests":
                value = (r.get("limits") or {}).get(res)
            if value in (None, ""):
                out.append(key)
                break
    return sorted(out)


#: Knative's queue-proxy sidecar, in every pod of a Knative Service: its per-Service resource
#: annotations, and the CPU it requests without them (Knative Serving's ``config-deployment``
#: default ``queue-sidecar-cpu-request``; it sets no other request or limit by default).
QUEUE_SIDECAR = "queue.sidecar.serving.knative.dev/"
QUEUE_SIDECAR_CPU_REQUEST_M = 25


def knative_pod_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A Knative Service's revision template as its pods will be: with the queue-proxy sidecar
    Knative adds, sized by the template's ``queue.sidecar.serving.knative.dev/{cpu,memory}-resource-
    {request,limit}`` annotations, else Knative's default request of 25m CPU."""
    ann = (template.get("metadata") or {}).get("annotations") or {}
    resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for kind, word in (("requests", "request"), ("limits", "limit")):
        for res in ("cpu", "memory"):
            value = ann.get(f"{QUEUE_SIDECAR}{res}-resource-{word}")
            if value not in (None, ""):
                resources[kind][res] = str(value)
    if not resources["requests"].get("cpu") and not resources["limits"].get("cpu"):
        resources["requests"]["cpu"] = f"{QUEUE_SIDECAR_CPU_REQUEST_M}m"
    spec = dict(template.get("spec") or {})
    spec["containers"] = [*(spec.get("containers") or []), {"name": "queue-proxy", "resources": resources}]
    return {**template, "spec": spec}


def knative_pod_shape(template: Mapping[str, Any]) -> dict[str, int]:
    """What one pod of a Knative Service's revision template counts against ResourceQuotas: its
    containers and the queue-proxy sidecar (``knative_pod_template``, ``pod_shape``)."""
    return pod_shape(knative_pod_template(template))


KNATIVE = ("serving.knative.dev", "v1", "services")
HEADROOM_LABEL = "scaleahead.io/headroom"
MANAGED_BY = "scaleahead"
#: Merge patches: supported by built-in kinds and custom resources alike (strategic merge is not).
MERGE = "application/merge-patch+json"

log = logging.getLogger("scaleahead.actuator")


class _PodOf:
    """A scale-up's pod as the quota admission counts it (its template with the namespace's
    LimitRange defaults and its RuntimeClass's overhead), worked out on first use, and its
    ``pod_shape``, worked out once: the scale-up's own quota check and every later scale-up of the
    namespace in the plan use the same one (until 2026-12-06 each later one worked it out again)."""

    __slots__ = ("_make", "_pod", "_shape")

    def __init__(self, make: Callable[[], Mapping[str, Any]]) -> None:
        self._make = make
        self._pod: Mapping[str, Any] | None = None
        self._shape: dict[str, int] | None = None

    def __call__(self) -> Mapping[str, Any]:
        if self._pod is None:
            self._pod = self._make()
        return self._pod

    def shape(self) -> dict[str, int]:
        if self._shape is None:
            self._shape = pod_shape(self())
        return self._shape


@dataclass(slots=True)
class _Taken:
    """The room a plan's scale-ups in one namespace took (``take_room``): per action target its pod
    and the pods its write adds, and their sums, kept as entries come and go. A quota without
    scopes subtracts the sums (less the asking scale-up's own entry): until 2026-12-06 each
    scale-up went through every earlier one, so a namespace's scale-ups cost the square of their
    number (100 in a namespace: 4,950 steps)."""

    entries: dict[str, tuple[_PodOf, int]] = field(default_factory=dict)
    pods: int = 0
    #: sum of pods added x ``pod_shape`` per resource; None until a quota on a resource asks (the
    #: shapes are worked out only then, as before)
    resources: dict[str, int] | None = None

    def put(self, target: str, pod: _PodOf, added: int) -> None:
        shape = pod.shape() if self.resources is not None else None  # (before anything changes: it may raise)
        self.pop(target)
        self.entries[target] = (pod, added)
        self.pods += added
        if self.resources is not None and shape is not None:
            for norm, v in shape.items():
                self.resources[norm] = self.resources.get(norm, 0) + added * v

    def pop(self, target: str) -> None:
        old = self.entries.get(target)
        if old is None:
            return
        pod, added = old
        shape = pod.shape() if self.resources is not None else None  # (worked out already: summed)
        del self.entries[target]
        self.pods -= added
        if self.resources is not None and shape is not None:
            for norm, v in shape.items():
                self.resources[norm] -= added * v

    def sums(self, key: str, resources: bool) -> dict[str, int]:
        """What every entry but ``key``'s took: ``pods``, and with ``resources`` each resource."""
        own = self.entries.get(key)
        out = {"pods": self.pods - (own[1] if own is not None else 0)}
        if resources:
            if self.resources is None:
                summed: dict[str, int] = {}  # kept only once whole (a pod that cannot be worked out raises)
                for pod, added in self.entries.values():
                    for norm, v in pod.shape().items():
                        summed[norm] = summed.get(norm, 0) + added * v
                self.resources = summed
            for norm, total in self.resources.items():
                out[norm] = total - (own[1] * own[0].shape().get(norm, 0) if own is not None else 0)
        return out


@dataclass(slots=True)
class _PlanReads:
    """What one plan read once and took (``KubernetesTarget.plan_reads``)."""

    #: namespace -> its ResourceQuotas as listed in this plan (None: could not be listed)
    quotas: dict[str, list[Mapping[str, Any]] | None] = field(default_factory=dict)
    #: namespaces whose quota list failed in this plan (warned once)
    quota_failed: set[str] = field(default_factory=set)
    #: namespaces whose LimitRange defaults this plan uses as read (re-read at most once a plan)
    limit_ranges: set[str] = field(default_factory=set)
    #: action target -> (namespace, its pod as the quota admission counts it), from its quota check
    pods: dict[str, tuple[str, _PodOf]] = field(default_factory=dict)
    #: namespace -> the room its scale-ups took, which the quota list does not show yet
    taken: dict[str, _Taken] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeadroomSpec:
    """The placeholder pods that hold node headroom (their PriorityClass must exist, see deploy/)."""

    priority_class: str = "scaleahead-headroom"
    cpu: str = "500m"
    memory: str = "512Mi"
    image: str = "registry.k8s.io/pause:3.9"


#: Connections the client keeps open: room for the actuator's concurrent writes
#: (actuation.concurrent_writes, at most 32) beside the Lease and the reads (the client's own
#: default is 5 a CPU core, 10 on 2 cores).
CLIENT_POOL_SIZE = 40


def make_api_client(kubeconfig: str | None = None, context: str | None = None, in_cluster: bool = False) -> Any:
    """An ``ApiClient`` from a kubeconfig file or the in-cluster service account; no retries (we retry)."""
    import yaml
    from kubernetes import config

    from scaleahead.errors import UserError

    cfg = k8s.Configuration()
    if kubeconfig and not in_cluster and not Path(kubeconfig).expanduser().is_file():
        raise UserError(
            f"The kubeconfig {kubeconfig} does not exist (or is not a file).",
            "Pass --kubeconfig with an existing file (or leave it out: $KUBECONFIG, then ~/.kube/config).",
        )
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=cfg
            )
    except (config.ConfigException, OSError, TypeError, ValueError, yaml.YAMLError) as exc:
        source = kubeconfig
        if source is None and not in_cluster:  # name where the default was looked for (newcomer audit)
            env = os.environ.get("KUBECONFIG")
            source = f"$KUBECONFIG ({env})" if env else "~/.kube/config (the default: $KUBECONFIG is not set)"
        raise UserError(
            f"Cannot load Kubernetes credentials from {source or 'the in-cluster service account'}: "
            f"{str(exc).rstrip('.')}.",
            "Pass --kubeconfig FILE with a valid cluster, user and context (or run in the cluster).",
        ) from exc
    cfg.retries = 0
    cfg.connection_pool_maxsize = max(int(cfg.connection_pool_maxsize or 0), CLIENT_POOL_SIZE)
    return k8s.ApiClient(cfg)


def require_api_server(api: Any, timeout_s: float = 5.0) -> None:
    """A ``UserError`` when the API server of ``api`` cannot be reached at all: refused, unknown
    host, a TLS failure, no answer within ``timeout_s``. Any HTTP answer passes (``GET /version``,
    which every role may read; a 401 or 403 is for the calls that follow to report).

    The one-shot commands (``plan --apply``, ``actuator reconcile``) ask first: with the server
    unreachable, each of their reads failed on its own, with a message cut in the middle of the
    client's exception and advice about RBAC and the kill switch (a newcomer audit)."""
    from urllib3.exceptions import HTTPError

    from scaleahead.errors import UserError

    host = str(getattr(api.configuration, "host", "") or "the API server")
    try:
        k8s.VersionApi(api).get_code(_preload_content=False, _request_timeout=timeout_s)
    except ApiException:
        return
    except (HTTPError, OSError) as exc:
        why = getattr(exc, "reason", None) or exc  # urllib3's MaxRetryError names the cause
        text = " ".join(str(why).split())
        raise UserError(
            f"Cannot reach the Kubernetes API server at {host}: {type(why).__name__}: {text[:300]}. "
            "Nothing was changed or recorded.",
            "Check the kubeconfig's server address (`kubectl cluster-info`) and the network, then run it again.",
        ) from exc


_RESOURCES = {
    "deployment_scale": "deployments/scale",
    "stateful_set_scale": "statefulsets/scale",
    "horizontal_pod_autoscaler": "horizontalpodautoscalers.autoscaling",
    "custom_object": "services.serving.knative.dev",
    "pod_eviction": "pods/eviction",
    "pod": "pods",
    "deployment": "deployments",
    "stateful_set": "statefulsets",
}
_VERBS = {"read": "get", "patch": "patch", "create": "create", "list": "list"}


def _verb_resource(fn: Any) -> tuple[str, str]:
    """The RBAC verb and resource an API client method needs, from its name."""
    name = getattr(fn, "__name__", "")
    verb, _, rest = name.partition("_")
    rest = rest.removeprefix("namespaced_")
    return _VERBS.get(verb, verb), _RESOURCES.get(rest, rest)


def _error(exc: Exception, target: str, verb: str, resource: str, namespace: str) -> ActuationError:
    """Turn a client exception into a skip/fail/conflict that names the object and the fix.

    An error someone must fix (403, 404, 422) or that may pass (5xx, no answer) is ``failed``: it
    is journaled so, counts in ``scaleahead_actions_total{result="failed"}`` and backs the workload
    off. Only a refusal that is the cluster working as meant (429: a PodDisruptionBudget allows no
    eviction now; a 403 from a full ResourceQuota, ``_forbidden``) is ``skipped``; a 429 on an
    eviction whose answer does not name a disruption budget is the API server's throttling (API
    Priority and Fairness), ``failed`` like any other.
    """
    if isinstance(exc, ApiException):
        status = exc.status or 0
        if status == 404:
            return ActuationError(
                "failed",
                f"{target} does not exist (404). Create it, or fix the policy's spec.target (kind, namespace, name).",
                404,
            )
        if status == 403:
            return _forbidden(status_message(exc), target, verb, resource, namespace)
        if status == 409:
            return ActuationError("conflict", f"{target} changed since it was read (409)")
        if status == 429 and resource == "pods/eviction" and _names_disruption_budget(exc):
            return ActuationError(
                "skipped", f"{target}: eviction refused (429), a PodDisruptionBudget allows no disruption now"
            )
        if status == 429:  # the API server's rate limiting (API Priority and Fairness): it may pass
            wait = retry_after(exc)
            if wait is None:
                return ActuationError(
                    "failed",
                    f"{target}: the API server is throttling requests (429 on '{verb}'); retried next cycle",
                    429,
                )
            return ActuationError(
                "failed",
                f"{target}: the API server is throttling requests (429 on '{verb}') and asked to wait {wait:g} s; "
                "retried at a cycle after that",
                429,
                retry_after_s=wait,
            )
        # What the API server (or an admission webhook: Knative refuses a min-scale above its
        # max-scale with a 400) said, quoted: until 2026-12-07 only the status line was kept
        # ("(422): Unprocessable Entity"), which named neither the field nor the fix (a review).
        said = status_message(exc)
        quoted = f": '{said}'" if said else ""
        if status in (400, 422):
            return ActuationError(
                "failed",
                f"{target}: the API server rejected the change ({status} {exc.reason}){quoted}; "
                "fix what it names (the policy's bounds, or the object), retried next cycle",
                status,
            )
        return ActuationError(
            "failed", f"{target}: API server error {status} {exc.reason}{quoted}; retried next cycle", status
        )
    if isinstance(exc, HTTPError):
        why = f"{target}: no answer from the API server ({type(exc).__name__}); retried next cycle"
        return ActuationError("failed", why)
    raise exc


_RBAC_REFUSAL = re.compile(r'\bcannot [\w*.-]+ (?:resource|path) "')
_QUOTA_EXCEEDED = re.compile(r"\bexceeded quota: ([^,\s]+)")
_QUOTA_UNSET = re.compile(r"\bfailed quota: ([^:\s]+): must specify")
_TERMINATING = re.compile(r"\bin namespace (\S+) because it is being terminated")
_ADMISSION = re.compile(
    r"admission webhook \"([^\"]+)\" denied the request|ValidatingAdmissionPolicy '([^']+)'[^:]* denied request"
)


def _forbidden(said: str, target: str, verb: str, resource: str, namespace: str) -> ActuationError:
    """A 403, told by the API server's message ``said``: RBAC ("User ... cannot VERB resource ..."),
    a full ResourceQuota, a namespace being deleted, an admission policy (a webhook such as
    Gatekeeper or Kyverno, or a ValidatingAdmissionPolicy), or another refusal, quoted. Only an RBAC
    refusal, or a 403 with no message, says "RBAC forbids" (until 2026-12-06 every 403 did).

    A full quota is ``skipped``, as when the quota check before the write finds no room
    (``actuator.safety``): the cluster working as meant, tried again by the next plans. The others
    are ``failed``: someone must fix them.
    """
    quoted = f"(403: '{said}')" if said else "(403)"
    if not said or _RBAC_REFUSAL.search(said):
        return ActuationError(
            "failed",
            f"RBAC forbids '{verb}' on {resource} in namespace {namespace} for {target} {quoted}. "
            "Grant it to scaleahead's service account (docs/actuator.md, 'RBAC needed').",
            403,
        )
    if m := _QUOTA_EXCEEDED.search(said):
        return ActuationError(
            "skipped",
            f"{target}: the namespace's ResourceQuota {namespace}/{m.group(1)} is full, the API server refused "
            f"'{verb}' on {resource} {quoted}; retried by the next plans, and done once the quota has room "
            "(raise the quota, or free room in it)",
            403,
        )
    if m := _QUOTA_UNSET.search(said):
        return ActuationError(
            "skipped",
            f"{target}: the namespace's ResourceQuota {namespace}/{m.group(1)} refuses pods whose containers do not "
            f"set what it limits {quoted}: set those resources on every container, or a LimitRange default",
            403,
        )
    if m := _TERMINATING.search(said):
        return ActuationError(
            "failed",
            f"{target}: namespace {m.group(1)} is being deleted, so the API server refuses '{verb}' on {resource} "
            f"{quoted}. Nothing to grant: the workload goes with its namespace; delete its policy, or wait "
            "until the namespace is gone",
            403,
        )
    if m := _ADMISSION.search(said):
        return ActuationError(
            "failed",
            f"{target}: an admission policy ({m.group(1) or m.group(2)}) refused '{verb}' on {resource} {quoted}. "
            "Change the policy engine's rule (e.g. Gatekeeper, Kyverno) so that it allows scaleahead's change, "
            "or the scaleahead policy so that it does not ask for it",
            403,
        )
    return ActuationError(
        "failed",
        f"{target}: the API server refused '{verb}' on {resource} in namespace {namespace} {quoted}; not an RBAC "
        "refusal: fix what the message says",
        403,
    )


def _read_failure(exc: Exception, ref: WorkloadRef, fn: Any) -> str:
    """Why ``read_state`` could not read ``ref``'s object with ``fn``: a sentence naming the workload."""
    if isinstance(exc, ApiException | HTTPError):
        verb, resource = _verb_resource(fn)
        # the loop backs the workload off (its read is tried again then, not necessarily next cycle)
        message = _error(exc, ref.key, verb, resource, ref.namespace).message
        return message.removesuffix("; retried next cycle").removesuffix("; retried")
    if isinstance(exc, ActuationError):
        return exc.message if ref.key in exc.message else f"{ref.key}: {exc.message}"
    return f"{ref.key}: unexpected object ({type(exc).__name__}: {exc})"


def _not_json(fn: Any, target: str, resp: Any, body: bytes, what: str = "") -> ActuationError:
    """The error for a 2xx answer that is not a JSON object: says what came back and the likely cause."""
    verb, resource = _verb_resource(fn)
    headers = getattr(resp, "headers", None) or {}
    kind = what or str(headers.get("Content-Type") or "no content type")
    start = body[:40].decode("utf-8", "replace")
    return ActuationError(
        "failed",
        f"{target or resource}: the API server's answer to '{verb}' on {resource} is not JSON ({kind}, "
        f"starting {start!r}): a proxy in between? Check the kubeconfig's server address; retried next cycle",
    )


def _names_disruption_budget(exc: ApiException) -> bool:
    """Whether a 429 answer to an eviction is a PodDisruptionBudget's refusal ("Cannot evict pod as it
    would violate the pod's disruption budget.", cause ``DisruptionBudget``), not throttling."""
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    return "disruption budget" in body.lower() or "DisruptionBudget" in body


def min_scale_key(template: Mapping[str, Any], target: str) -> str:
    """The annotation of a Knative revision template (``spec.template``) that holds its min-scale:
    the spelling it uses (``MIN_SCALE`` or the older ``MIN_SCALE_OLD``), ``MIN_SCALE`` if it has
    neither. Both at once raise ``ActuationError`` (skipped): which one counts is Knative's choice
    (it reads ``min-scale`` first), and writing either would leave the other behind."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, Mapping):
        return MIN_SCALE
    if MIN_SCALE in annotations and MIN_SCALE_OLD in annotations:
        raise ActuationError(
            "skipped",
            f"{target} has both {MIN_SCALE}={annotations[MIN_SCALE]!r} and the older spelling "
            f"{MIN_SCALE_OLD}={annotations[MIN_SCALE_OLD]!r} on spec.template.metadata.annotations: "
            "Knative goes by min-scale and ignores minScale, so scaleahead cannot tell which one the owner "
            "meant and does not write either; remove one of them",
        )
    return MIN_SCALE_OLD if MIN_SCALE_OLD in annotations else MIN_SCALE


def _check_mappings(obj: Any, path: Sequence[str], target: str) -> None:
    """Each of ``path``'s objects in ``obj`` that is present is a mapping, else ``ActuationError``
    (skipped) naming it: a Service whose ``spec.template.metadata`` is a string failed every cycle
    as "unexpected AttributeError" (a review of 2026-12-07)."""
    node: Any = obj
    for i, key in enumerate(("", *path)):
        if key:
            node = node.get(key)
        if node is None:
            return
        if not isinstance(node, Mapping):
            where = ".".join(path[:i]) or "the object"
            raise ActuationError(
                "skipped",
                f"{target} has {where} of type {type(node).__name__}, not an object: unexpected object shape; "
                "fix the object (kubectl get -o yaml)",
            )


def _min_scale_field(key: str) -> str:
    return f"spec.template.metadata.annotations[{key}]"


def _int_field(obj: Mapping[str, Any], path: str, target: str, default: int | None = None) -> int:
    """The integer at dotted ``path`` (annotation keys may contain dots: use ``annotations[key]``)."""
    node: Any = obj
    parts: list[str] = []
    rest = path
    while rest:
        if rest.startswith("annotations["):
            key, _, rest = rest.removeprefix("annotations[").partition("]")
            parts += ["annotations", key]
            rest = rest.removeprefix(".")
        else:
            head, _, rest = rest.partition(".")
            parts.append(head)
    for p in parts:
        node = node.get(p) if isinstance(node, Mapping) else None
        if node is None:
            break
    if node is None:
        if default is not None:
            return default
        raise ActuationError("skipped", f"{target} has no {path}: unexpected object shape; check the object's kind")
    try:
        value = int(node)
    except (TypeError, ValueError):
        raise ActuationError(
            "skipped", f"{target} has {path}={node!r}, not an integer; fix the field on the object"
        ) from None
    if value < 0:
        raise ActuationError("skipped", f"{target} has {path}={value}, a negative count; fix the field")
    return value


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        has = key in labels
        if (
            (op == "In" and (not has or labels[key] not in values))
            or (op == "NotIn" and has and labels[key] in values)
            or (op == "Exists" and not has)
            or (op == "DoesNotExist" and has)
        ):
            return False
    return True


def _epoch(stamp: Any) -> float | None:
    """Epoch seconds of an RFC 3339 API timestamp (``2026-12-02T15:00:00Z``), None if absent or bad."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _ReadyPod:
    """A pod that became Ready: its UID, labels, creation time and readiness time (s)."""

    uid: str
    labels: Mapping[str, str]
    created: float
    readiness_s: float


def _restarted(pod: Mapping[str, Any]) -> bool:
    """Whether a container of the pod restarted: its Ready time may then be after the restart."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        count = status.get("restartCount") if isinstance(status, Mapping) else None
        if isinstance(count, int) and count > 0:
            return True
    return False


def _knative_pod_of(pod: Mapping[str, Any], service: str) -> bool:
    """Whether ``pod`` is a pod of Knative Service ``service`` that the quotas count: one of its
    revisions' (label ``serving.knative.dev/service``), not terminating (no ``deletionTimestamp``),
    not finished (phase ``Succeeded`` or ``Failed``)."""
    meta = pod.get("metadata") or {}
    if (meta.get("labels") or {}).get(KNATIVE_SERVICE_LABEL) != service or meta.get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _ready_pod(pod: Mapping[str, Any], since: float) -> _ReadyPod | None:
    """The pod's readiness sample, if it was created at or after ``since``, is Ready and none of
    its containers restarted (``lastTransitionTime`` is the latest change of Ready: after a
    restart or a readiness flap it is not the start-up)."""
    meta = pod.get("metadata") or {}
    created = _epoch(meta.get("creationTimestamp"))
    if created is None or created < since or _restarted(pod):
        return None
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready" and cond.get("status") == "True":
            ready = _epoch(cond.get("lastTransitionTime"))
            if ready is None:
                return None
            uid = str(meta.get("uid") or f"{meta.get('name', '')}@{meta.get('creationTimestamp')}")
            return _ReadyPod(uid, meta.get("labels") or {}, created, ready - created)
    return None


class _PodIndex:
    """The Ready pods of one namespace, found by a workload's selector without scanning them all."""

    def __init__(self, pods: Sequence[_ReadyPod]) -> None:
        self.pods = sorted(pods, key=lambda p: p.created)
        self._by_key: dict[str, dict[str, list[_ReadyPod]]] = {}

    def matching(self, selector: Mapping[str, Any] | None) -> tuple[_ReadyPod, ...]:
        """The pods ``selector`` matches, oldest first."""
        if not isinstance(selector, Mapping) or not selector:
            return ()
        candidates: Sequence[_ReadyPod] = self.pods
        match_labels = selector.get("matchLabels") or {}
        if isinstance(match_labels, Mapping) and match_labels:
            key, value = next(iter(match_labels.items()))
            index = self._by_key.get(key)
            if index is None:
                index = self._by_key[key] = {}
                for p in self.pods:  # in creation order, so each bucket is too
                    if key in p.labels:
                        index.setdefault(p.labels[key], []).append(p)
            candidates = index.get(value, [])
        return tuple(p for p in candidates if _selector_matches(selector, p.labels))


class KubernetesTarget:
    """Reads and writes the objects behind a plan's actions through the official client.

    ``live`` and ``write`` may run for actions of different namespaces at once (``concurrent_io``:
    ``Actuator`` with ``concurrent_writes`` above 1); one namespace's stay one at a time.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (``make_api_client``).
        policies: the policies, for each workload's mode (``direct``/``floor``) and HPA name.
        headroom: the placeholder pods' spec for ``Headroom`` actions.
        timeout_s: per-request timeout; a timeout fails the action (retried next cycle).
        clock: "now" for the readiness-time window (default: the system clock, since the API
            server's timestamps are wall-clock times); tests pass a ``VirtualClock``.
        sample_window_s: only pods created in this window before now give readiness times (s).
        placement: ``read_state`` also reads nodes, pods and PDBs (``read_placement``), for
            rebalancing moves.
    """

    #: ``live`` and ``write`` of actions in different namespaces may overlap (``Actuator``): what a
    #: plan reads and takes is kept per namespace (``_PlanReads``), and the client's pool is shared.
    concurrent_io = True

    def __init__(
        self,
        api_client: Any,
        policies: Sequence[Policy] = (),
        headroom: HeadroomSpec | None = None,
        timeout_s: float = 10.0,
        clock: Clock | None = None,
        sample_window_s: float = 3600.0,
        placement: bool = False,
        quotas: bool = True,
    ) -> None:
        self.api = api_client
        self.placement = placement  # read nodes, pods and PDBs too (rebalancing, ``loop.max_moves``)
        self.quotas = quotas  # read the managed namespaces' quotas (fair sharing under shortage)
        self._templates: dict[WorkloadRef, Mapping[str, Any]] = {}  # pod template per workload, from read_state
        self.apps = k8s.AppsV1Api(api_client)
        self.core = k8s.CoreV1Api(api_client)
        self.autoscaling = k8s.AutoscalingV2Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.policy = k8s.PolicyV1Api(api_client)
        self.node_api = k8s.NodeV1Api(api_client)
        self.headroom = headroom or HeadroomSpec()
        self.timeout_s = timeout_s
        self._policies: dict[WorkloadRef, Policy] = {p.workload: p for p in policies}
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.sample_window_s = float(sample_window_s)
        # per namespace: when its LimitRanges were read, and their Container defaults
        self._limit_ranges: dict[str, tuple[float, list[Defaults] | None]] = {}
        self._limit_ranges_unread: set[str] = set()  # namespaces warned about (no permission, no answer)
        # per RuntimeClass: when it was read, and the overhead admission gives its pods
        self._overheads: dict[str, tuple[float, Mapping[str, Any]]] = {}
        self._overheads_unread: set[str] = set()
        # the workloads the last read_state could not read, and why (warned once per reason)
        self._unreadable: dict[WorkloadRef, str] = {}
        #: (resource, namespace) -> why its last list failed (warned once per reason; GETs instead)
        self._list_failed: dict[tuple[str, str], str] = {}
        # (resource, namespace) -> (how many of ours were read there, when): found holding far more
        # objects than ours, so read one by one (``_list_workloads``)
        self._list_sparse: dict[tuple[str, str], tuple[int, float]] = {}
        # namespaces whose pods could not be listed to count a Knative Service's running pods
        # (warned once until a list succeeds again)
        self._knative_pods_unread: set[str] = set()
        # the reads and quota room of the plan being applied (``plan_reads``), None between plans
        self._plan: _PlanReads | None = None
        #: node -> until when its drain fence holds (wall clock), as far as this target knows:
        #: its own fences and those ``read_placement`` read (``lift_expired_fences``)
        self._fences: dict[str, float] = {}
        #: when to list the nodes for fences left by an earlier run (``_read_fences``): 0 at once,
        #: infinity once read (``read_placement`` reads them each cycle) or refused (403)
        self._fences_next_read = 0.0
        #: when fences past their time, not lifted (actuation paused or killed, no rights to patch),
        #: may be read again as they are (``fences``): a fence lifted by hand is then no longer known
        self._fences_refresh_at = 0.0
        #: nodes whose lift failed (after a drain not completed): lifted at the next call, unless the
        #: node's fence time is now later than the one known then (fenced anew by another replica)
        self._lift_asap: dict[str, float] = {}

    @contextmanager
    def plan_reads(self) -> Iterator[None]:
        """Within this block (one plan, ``Actuator.apply_plan``), each namespace's ResourceQuotas are
        listed at most once and its LimitRange defaults read at most once, and the room a scale-up
        of the plan takes is taken off the listed room for the plan's later scale-ups in the
        namespace (the quota's ``used`` counts new pods only once the controller created them).
        Before 2026-12-06 every scale-up listed its namespace's quotas again (1,000 lists for
        1,000 scale-ups), and two scale-ups in one namespace could both be given the same free room.
        A scale-down's pods are not given back within the plan (they stop later). Nested: the
        outer block's reads."""
        if self._plan is not None:
            yield
            return
        self._plan = _PlanReads()
        try:
            yield
        finally:
            self._plan = None

    def take_room(self, action: Action, value: int, live: LiveObject) -> None:
        """Count the pods a write of ``value`` for ``action`` adds against its namespace's quotas
        for the rest of the plan (``plan_reads``; outside one: nothing). ``write`` calls it; the
        actuator calls it for a dry run's actions too. A retry of the action (after a 409)
        replaces its count."""
        if self._plan is None or isinstance(action, MovePod) or live.fact("quota_pods_free") is None:
            return
        found = self._plan.pods.get(action.target)
        if found is None:
            return
        namespace, pod = found
        pods_now = live.fact("pods_now")
        added = value - (live.value if pods_now is None else pods_now)
        taken = self._plan.taken.setdefault(namespace, _Taken())
        if added > 0:
            taken.put(action.target, pod, added)
        else:
            taken.pop(action.target)

    def _give_back_room(self, action: Action) -> None:
        """A write the API server refused (a 4xx other than a 409): its pods do not come."""
        if self._plan is not None and not isinstance(action, MovePod):
            # only its own namespace's: another namespace's writes may be adding to theirs right now
            # (``Actuator`` with ``concurrent_writes``: one worker per namespace at a time)
            found = self._plan.pods.get(action.target)
            if found is not None and found[0] in self._plan.taken:
                self._plan.taken[found[0]].pop(action.target)

    # -- helpers --------------------------------------------------------------------------------
    def _raw(self, fn: Any, *args: Any, target: str = "", **kwargs: Any) -> dict[str, Any]:
        """Call ``fn`` and return the JSON object it answered (errors name ``target``, else the resource).

        A 2xx answer that is not a JSON object (an authenticating proxy's HTML login page, a body
        cut short) is an ``ActuationError`` ``failed``: nothing is read from garbage, and the caller
        records a clear outcome instead of an exception escaping the plan.
        """
        resp = fn(*args, _preload_content=False, _request_timeout=self.timeout_s, **kwargs)
        body = resp.data or b"{}"
        try:
            data = json.loads(body)
        except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
            raise _not_json(fn, target, resp, body) from exc
        if not isinstance(data, dict):
            raise _not_json(fn, target, resp, body, f"a JSON {type(data).__name__}, not an object")
        return data

    def mode(self, ref: WorkloadRef) -> tuple[str, str | None]:
        p = self._policies.get(ref)
        if p is None:
            return "direct", None
        return p.spec.target.mode, p.spec.target.hpa_name

    def field_target(self, action: Action) -> str:
        """The object whose field ``live`` reads and the write changes (its managed field's record):
        the HPA named by the policy for mode ``floor``, else the action's own target."""
        if not isinstance(action, MovePod) and action.workload.kind in ("Deployment", "StatefulSet"):
            mode, hpa = self.mode(action.workload)
            if mode == "floor" and hpa:
                return f"HorizontalPodAutoscaler/{action.workload.namespace}/{hpa}"
        return action.target

    def _call(self, action: Action, fn: Any, *args: Any, target: str = "", **kwargs: Any) -> dict[str, Any]:
        """Call ``fn`` for ``action``; errors name ``target`` (default: the action's), verb and resource."""
        ns = action.namespace if isinstance(action, MovePod) else action.workload.namespace
        verb, resource = _verb_resource(fn)
        try:
            return self._raw(fn, *args, target=target or action.target, **kwargs)
        except ActuationError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to skip/fail/conflict or re-raised
            raise _error(exc, target or action.target, verb, resource, ns) from exc

    def _quota_left(
        self,
        namespace: str,
        templates: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
        key: str = "",
    ) -> dict[str, int] | None:
        """What the namespace's ResourceQuotas leave: ``pods`` (quotas on ``pods`` / ``count/pods``)
        and ``requests.cpu`` (m), ``requests.memory`` (MiB), ``limits.cpu``, ``limits.memory`` (``cpu``
        and ``memory`` are the requests), the smallest over the quotas (negative when a quota is
        over its limit). None: no permission or no answer; the API server's quota admission still
        refuses pods beyond the quotas.

        A quota with scopes counts only if it applies to a pod of one of ``templates`` (called only
        when such a quota exists; ``actuator.quota_scopes``); without ``templates``, every quota counts.

        Within a plan (``plan_reads``) the quotas are listed once per namespace, and what the plan's
        scale-ups other than ``key``'s took (``take_room``) is taken off each quota that counts their pods.
        """
        plan = self._plan
        if plan is not None and namespace in plan.quotas:
            items = plan.quotas[namespace]
        else:
            forbidden = False
            try:
                data = self._raw(self.core.list_namespaced_resource_quota, namespace)
            except (ApiException, HTTPError) as exc:
                items = None
                forbidden = getattr(exc, "status", None) == 403
                if plan is not None and namespace not in plan.quota_failed:
                    plan.quota_failed.add(namespace)
                    log.warning(
                        "cannot list the ResourceQuotas of namespace %s (%s): scale-ups there are not limited "
                        "by them%s; the API server's quota admission still refuses pods beyond them",
                        namespace,
                        f"HTTP {exc.status}" if isinstance(exc, ApiException) else type(exc).__name__,
                        " this plan (no permission)" if forbidden else " until a list answers (tried again for each)",
                        extra={"event": "quota_list_failed", "namespace": namespace},
                    )
            else:
                items = [rq for rq in data.get("items") or [] if isinstance(rq, Mapping)]
            # A failed list is not kept for the plan (a review found one 500 lifting the quotas for
            # every later scale-up of the plan): the next scale-up there lists again. No permission is.
            if plan is not None and (items is not None or forbidden):
                plan.quotas[namespace] = items
        if items is None:
            return None
        taken = None if plan is None else plan.taken.get(namespace)
        left: dict[str, int] = {}
        pods: Sequence[Mapping[str, Any]] | None = None
        for rq in items:
            spec = rq.get("spec") or {}
            scoped = bool(spec.get("scopes") or spec.get("scopeSelector"))
            if templates is not None and scoped:
                pods = templates() if pods is None else pods
                if not any(quota_applies(rq, t) for t in pods):
                    continue
            rooms = _rooms(rq)
            if taken is not None and taken.entries:
                if scoped:  # only the pods it applies to
                    for target, (pod, n) in taken.entries.items():
                        if target == key or not quota_applies(rq, pod()):
                            continue
                        for norm in rooms:
                            rooms[norm] -= n * (1 if norm == "pods" else pod.shape().get(norm, 0))
                else:
                    took = taken.sums(key, resources=any(k != "pods" for k in rooms))
                    for norm in rooms:
                        rooms[norm] -= took.get(norm, 0)
            for norm, room in rooms.items():
                left[norm] = min(left.get(norm, room), room)
        return left

    #: How long a namespace's LimitRange defaults, and a RuntimeClass's overhead, are reused (s).
    LIMIT_RANGES_TTL_S = 60.0

    def _limit_defaults(self, namespace: str) -> list[Defaults]:
        return self._limit_defaults_read(namespace) or []

    def _limit_defaults_read(self, namespace: str) -> list[Defaults] | None:
        """The Container defaults of the namespace's LimitRanges (``actuator.limit_ranges``), read at
        most once a minute. Unreadable (no permission, no answer): None, with one warning per
        namespace; quota room is then counted from the templates as they are."""
        now = self.clock.now()
        cached = self._limit_ranges.get(namespace)
        plan = self._plan
        if cached is not None and (
            now - cached[0] < self.LIMIT_RANGES_TTL_S or (plan is not None and namespace in plan.limit_ranges)
        ):
            if plan is not None:
                plan.limit_ranges.add(namespace)
            return cached[1]
        if plan is not None:  # read once a plan, even a plan longer than the minute
            plan.limit_ranges.add(namespace)
        try:
            items = self._raw(self.core.list_namespaced_limit_range, namespace).get("items") or []
        except (ApiException, HTTPError, ActuationError, ValueError) as exc:
            if namespace not in self._limit_ranges_unread:
                self._limit_ranges_unread.add(namespace)
                status = getattr(exc, "status", None)
                log.warning(
                    "cannot list LimitRanges in %s (%s): quota room counts pod templates without their defaults%s",
                    namespace,
                    status or type(exc).__name__,
                    "; grant 'list limitranges' (deploy/base/rbac.yaml)"
                    if status == 403
                    else " (tried again in a minute)",
                )
            defaults: list[Defaults] | None = None
        else:
            defaults = container_defaults([i for i in items if isinstance(i, Mapping)])
        self._limit_ranges[namespace] = (now, defaults)
        return defaults

    def _quota_room(
        self, namespace: str, template: Callable[[], Mapping[str, Any]] | None = None, key: str = ""
    ) -> tuple[int | None, tuple[str, ...]]:
        """Pods the namespace's ResourceQuotas still allow, and the quota keys that bind.

        Quotas on ``pods`` / ``count/pods`` count pods. With ``template`` (the workload's pod
        template; called only when a quota on CPU or memory, or one with scopes, exists), quotas on
        CPU and memory count how many pods of it (``pod_shape``) fit in what is left, and a quota
        whose scopes do not apply to its pods does not count; a pod that asks for none of a quota's
        resource is not limited by it here (the API server decides). None: no such quota, or the
        quotas cannot be read. ``key``: the action's target, whose write takes the room (``take_room``).
        """

        def make() -> Mapping[str, Any]:
            assert template is not None  # (asked for only with a template)
            return self._with_overhead(with_defaults(template(), self._limit_defaults(namespace)))

        pod = _PodOf(make)
        if self._plan is not None and key and template is not None:
            self._plan.pods[key] = (namespace, pod)
        left = self._quota_left(namespace, None if template is None else lambda: [pod()], key)
        if not left:
            return None, ()
        limits = [(left["pods"], "pods")] if "pods" in left else []
        resources = [k for k in left if k != "pods"]
        if resources and template is not None:
            # the quota admission refuses every pod of this template ("must specify ..."); known only
            # when the namespace's LimitRange defaults could be read
            unset = unset_resources(pod(), resources) if self._limit_defaults_read(namespace) is not None else []
            if unset:
                return 0, tuple(f"unset:{key}" for key in unset)
            per_pod = pod.shape()
            limits += [(left[k] // per_pod[k], k) for k in resources if per_pod.get(k, 0) > 0]
        if not limits:
            return None, ()
        free = min(n for n, _ in limits)
        return free, tuple(sorted({key for n, key in limits if n == free}))

    def _list_pods(self, namespace: str, label_selector: str = "") -> list[Mapping[str, Any]] | Exception:
        """The namespace's pods (those ``label_selector`` selects, if given), or why they cannot be listed."""
        kwargs = {"label_selector": label_selector} if label_selector else {}
        try:
            data = self._raw(self.core.list_namespaced_pod, namespace, **kwargs)
        except (ApiException, HTTPError, ActuationError, ValueError) as exc:
            return exc
        return [p for p in data.get("items") or [] if isinstance(p, Mapping)]

    def _ready_pods(self, namespace: str, since: float, listed: list[Mapping[str, Any]] | Exception) -> _PodIndex:
        """The namespace's pods created since ``since`` that became Ready and never restarted (empty if unreadable)."""
        if isinstance(listed, Exception):
            # Without 'list pods' the loop plans with the configured start-up delay.
            log.warning("cannot list pods in %s for readiness times: %s", namespace, listed)
            return _PodIndex([])
        return _PodIndex([r for r in (_ready_pod(p, since) for p in listed) if r is not None])

    def _knative_tally(self, namespace: str, listed: list[Mapping[str, Any]] | Exception) -> dict[str, int] | None:
        """Per Knative Service name, the pods of ``listed`` (pods of ``namespace``) that the quotas
        count as its own (its revisions' pods, label ``serving.knative.dev/service``, neither
        terminating nor Succeeded or Failed): often more than its ``min-scale``, since its autoscaler
        adds pods for traffic. Counted in one pass (a pass per Service cost 0.46 s a cycle for
        1,000 Services). None when the pods cannot be listed, with one warning until a list succeeds
        again."""
        if isinstance(listed, Exception):
            if namespace not in self._knative_pods_unread:
                self._knative_pods_unread.add(namespace)
                status = getattr(listed, "status", None)
                log.warning(
                    "cannot list pods in %s (%s): a Knative Service's pods there are counted as its min-scale "
                    "in quota checks, though its autoscaler may run more%s",
                    namespace,
                    status or type(listed).__name__,
                    "; grant 'list pods' (deploy/base/rbac.yaml)" if status == 403 else "",
                )
            return None
        self._knative_pods_unread.discard(namespace)
        tally: dict[str, int] = {}
        for p in listed:
            name = ((p.get("metadata") or {}).get("labels") or {}).get(KNATIVE_SERVICE_LABEL)
            if isinstance(name, str) and _knative_pod_of(p, name):
                tally[name] = tally.get(name, 0) + 1
        return tally

    def kill_switch(self, namespace: str, name: str = "scaleahead-kill-switch") -> str:
        """A reason if ConfigMap ``namespace/name`` has ``data.paused: "true"``, else ``""``.

        A missing ConfigMap means "not paused"; one that cannot be read (403, 5xx, timeout) pauses,
        because acting without being able to see the switch is not safe.
        """
        try:
            cm = self._raw(self.core.read_namespaced_config_map, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return ""
            return f"cannot read ConfigMap {namespace}/{name} ({exc.status} {exc.reason})"
        except HTTPError as exc:
            return f"cannot read ConfigMap {namespace}/{name} (no answer from the API server: {type(exc).__name__})"
        except ActuationError as exc:  # an answer that is not JSON: the switch is not seen
            return f"cannot read ConfigMap {namespace}/{name} ({exc.message})"
        if str((cm.get("data") or {}).get("paused", "")).strip().lower() == "true":
            return f"ConfigMap {namespace}/{name} has paused=true"
        return ""

    # -- placement (rebalancing) ----------------------------------------------------------------
    def read_placement(
        self,
    ) -> tuple[tuple[Node, ...], tuple[Pod, ...], tuple[PodDisruptionBudget, ...], tuple[Pod, ...]]:
        """Nodes (allocatable CPU, memory and pods, labels, taints), the pods bound to them (requests
        as the scheduler counts them, observed CPU usage, owner, labels, interference class,
        required pod anti-affinity, host ports, node selector, required node affinity,
        tolerations, and why a pod must not move: ``unmovable_reason``) and PodDisruptionBudgets
        (per owner of the pods they select), for ``planner.rebalance``.

        Every pod bound to a node and not finished (``Succeeded``, ``Failed``) is read, as the
        scheduler counts it on its node: a pod not running yet or terminating stays, but takes its
        place. A pod's usage comes from the metrics API (``metrics.k8s.io`` PodMetrics,
        metrics-server) when the cluster serves it; the planner then places a pod by the larger of
        its requests and its usage. Without the metrics API, usage is left at 0 and requests alone
        count. Last, the pods not bound to a node yet (``Pending``, not being deleted), with their
        requests, owner, node selector, required node affinity and tolerations and ``node`` "":
        ``ClusterState.pending_pods``.
        """
        nodes = []
        fences: dict[str, float] = {}
        for item in self._raw(self.core.list_node).get("items") or []:
            meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
            alloc = status.get("allocatable") or {}
            fence = node_fence(item)
            if fence is not None:  # lifted by ``lift_expired_fences`` once its time is over
                fences[str(meta.get("name", ""))] = fence
            nodes.append(
                Node(
                    str(meta.get("name", "")),
                    cpu_millis(alloc.get("cpu")),
                    memory_mb(alloc.get("memory")),
                    dict(meta.get("labels") or {}),
                    # a node fenced for its drain is as a cordoned one: nothing moves there or off it
                    schedulable=not spec.get("unschedulable", False) and fence is None,
                    taints=node_taints(item),
                    max_pods=pod_limit(alloc.get("pods")),
                    ephemeral_storage_mb=memory_mb(alloc.get("ephemeral-storage")),
                )
            )
        self._fences, self._fences_next_read = fences, math.inf  # the nodes as they are now
        usage = self._pod_usage()
        pods = []
        pending = []
        for item in self._raw(self.core.list_pod_for_all_namespaces).get("items") or []:
            meta, spec = item.get("metadata") or {}, item.get("spec") or {}
            phase = (item.get("status") or {}).get("phase", "Running")
            placed = bool(spec.get("nodeName"))
            waiting = not placed and phase == "Pending" and not meta.get("deletionTimestamp")
            if phase in ("Succeeded", "Failed") or not (placed or waiting):
                continue  # finished, or neither on a node nor waiting for one: not counted anywhere
            cpu, memory = pod_requests(spec)
            owner = controller_owner(item)
            node_selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
            if waiting:  # not placed yet: the scheduler still needs room for it (a scale-up's new pod)
                name = str(meta.get("name", ""))
                pending.append(  # with its node rules: room for it is kept on the nodes they allow
                    Pod(
                        str(meta.get("namespace", "")),
                        name,
                        "",
                        cpu,
                        memory,
                        owner=owner[1] if owner else "",
                        node_selector=node_selector,
                        required_node_terms=required_node_terms(item),
                        tolerations=pod_tolerations(spec),
                    )
                )
                continue
            labels = dict(meta.get("labels") or {})
            cls = labels.get(INTERFERENCE_LABEL, "none")
            used_cpu, used_memory = usage.get((str(meta.get("namespace", "")), str(meta.get("name", ""))), (0.0, 0.0))
            pods.append(
                Pod(
                    str(meta.get("namespace", "")),
                    str(meta.get("name", "")),
                    str(spec["nodeName"]),
                    cpu,
                    memory,
                    owner=owner[1] if owner and owner[0] in ("ReplicaSet", "StatefulSet") else "",
                    usage_cpu_m=used_cpu,
                    usage_memory_mb=used_memory,
                    interference=cls if cls in _INTERFERENCE else "none",  # type: ignore[arg-type]
                    labels=labels,
                    # a DaemonSet's pod or a static (mirror) pod: bound to its node, never moved, and
                    # no reason to keep the node (kubectl drain --ignore-daemonsets, cluster autoscaler)
                    node_bound=(owner is not None and owner[0] == "DaemonSet")
                    or "kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
                    node_selector=node_selector,
                    required_node_terms=required_node_terms(item),
                    tolerations=pod_tolerations(spec),
                    anti_affinity_terms=anti_affinity_terms(spec),
                    host_ports=host_ports(spec),
                    unmovable=unmovable_reason(item),
                    ephemeral_storage_request_mb=pod_ephemeral_storage_mb(spec),
                    uid=str(meta.get("uid") or ""),
                )
            )
        pdbs = []
        budgets: dict[int, int] = {}  # pod index -> how many budgets cover it
        for item in self._raw(self.policy.list_pod_disruption_budget_for_all_namespaces).get("items") or []:
            meta = item.get("metadata") or {}
            ns = str(meta.get("namespace", ""))
            # policy/v1: no selector selects no pod, the empty one every pod of the namespace
            selector = label_selector((item.get("spec") or {}).get("selector"))
            allowed = int((item.get("status") or {}).get("disruptionsAllowed", 0))
            if selector is None:
                continue
            hit = [i for i, p in enumerate(pods) if p.namespace == ns and selector.matches(p.labels)]
            for i in hit:
                budgets[i] = budgets.get(i, 0) + 1
            covered = {pods[i].owner for i in hit if pods[i].owner}
            pdbs += [PodDisruptionBudget(ns, str(meta.get("name", "")), o, allowed) for o in sorted(covered)]
        for i, n in budgets.items():
            if n > 1 and not pods[i].unmovable:  # the Eviction API answers 500 for such a pod
                pods[i] = replace(
                    pods[i],
                    unmovable=f"it is covered by {n} PodDisruptionBudgets, which the Eviction API refuses to evict",
                )
        return tuple(nodes), tuple(pods), tuple(pdbs), tuple(pending)

    # -- drain fences -----------------------------------------------------------------------------
    def fence_node(self, node: str, until: float) -> None:
        """Fence ``node`` before a plan that drains it writes anything: the taint ``DRAIN_FENCE_TAINT``
        (``NoSchedule``) and the annotation ``DRAIN_FENCE_UNTIL``, so that neither the moved pods'
        replacements nor a scale-up's new pods are scheduled onto the node being freed (the
        scheduler's default scoring prefers the emptiest node). A fence there already is extended
        to ``until`` if that is later. The node's other taints are kept: the patch replaces the
        list with a ``resourceVersion`` precondition, read again on a 409 (twice at most).
        Raises ``ActuationError`` when the node cannot be read or patched."""
        self._fence_patch(node, until)

    def unfence_node(self, node: str, over_at: float | None = None) -> bool:
        """Lift ``node``'s fence (the drain was not completed, or its time is over): the taint and
        the annotation are removed, the node's other taints kept. True when a fence was lifted,
        False when there was none (or the node is gone: 404). With ``over_at``, only a fence whose
        time on the node is over at ``over_at`` is lifted (a later one is remembered instead). Raises
        when the node cannot be read or patched; the next ``lift_expired_fences`` then tries again,
        unless the node has been fenced anew, for a later time, since."""
        try:
            lifted = self._fence_patch(node, None, over_at)
        except Exception:
            # lifted at the next call unless fenced anew since (a later time than the one known now)
            self._lift_asap[node] = self._fences.get(node, math.inf) if over_at is None else over_at
            raise
        self._lift_asap.pop(node, None)
        return lifted

    def fences(self, now: float) -> dict[str, float]:
        """The nodes fenced as far as this target knows at ``now`` (the wall clock), and each fence's
        time (0: none readable), for the metric ``scaleahead_drain_fence_until_seconds``: those it
        set or a placement read found, and those the node list finds (made here too when due, as in
        ``lift_expired_fences``: a reader that lifts nothing, paused, still reports an earlier run's
        fences). While a fence is past its time the nodes are listed again every
        ``FENCE_READ_RETRY_S``, as they are: one lifted by hand meanwhile is no longer reported."""
        if now >= self._fences_next_read:
            self._read_fences(now)
        elif now >= self._fences_refresh_at and self._overdue(now):
            self._read_fences(now, whole=True)
        return dict(self._fences)

    def fence_work_due(self, now: float) -> bool:
        """Whether ``lift_expired_fences(now)`` has anything to do: a fence past its time, a lift to
        try again, or the node list to make. Without any, no request is made."""
        return now >= self._fences_next_read or bool(self._lift_asap) or self._overdue(now)

    def _overdue(self, now: float) -> bool:
        """Whether a fence this target knows is past its time at ``now``."""
        return any(until <= now for until in self._fences.values())

    def lift_expired_fences(self, now: float) -> list[str]:
        """Lift the fences whose time is over at ``now`` (the wall clock): the nodes this target
        fenced, and those ``read_placement`` found fenced (by another replica, or before a restart;
        a fence without a readable time is lifted at once). A failure is logged and tried again at
        the next call, as is a lift that failed after a drain not completed (``unfence_node``).
        Returns the nodes whose fence was lifted."""
        if now >= self._fences_next_read:
            self._read_fences(now)
        due = {node for node, until in self._fences.items() if until <= now}
        lifted = []
        for node in sorted(due | set(self._lift_asap)):
            until = self._fences.get(node)
            try:
                # a lift reads the node's own time again: another replica or shard may have fenced it
                # anew since this one read it or failed to lift it (reviews of 2026-12-07)
                there = self.unfence_node(node, over_at=max(now, self._lift_asap.get(node, now)))
            except Exception as exc:  # noqa: BLE001 - one node's failure never stops the others
                log.warning(
                    "drain_fence_lift_failed: could not lift the fence of node %s, tried again at the next plan: %s",
                    node,
                    exc,
                    extra={"event": "drain_fence_lift_failed", "node": node},
                )
                continue
            if there:
                log.info(
                    "drain_fence_lifted: node %s (%s)",
                    node,
                    f"its fence ran until {_utc(until)}"
                    if until is not None and until <= now
                    else "its drain was not completed",
                    extra={"event": "drain_fence_lifted", "node": node},
                )
                lifted.append(node)
        return lifted

    def _read_fences(self, now: float, whole: bool = False) -> None:
        """Once per process, when no ``read_placement`` came first (rebalancing turned off since, a
        restart): the nodes fenced by an earlier run, so that their fences are lifted in time. A
        refusal (403: the rebalance component's rules are not granted) is not asked again; another
        failure is asked again after ``FENCE_READ_RETRY_S``. ``whole``: the fences as listed replace
        those known (``fences``, for fences past their time)."""
        self._fences_refresh_at = now + FENCE_READ_RETRY_S
        try:
            items = self._raw(self.core.list_node).get("items") or []
        except (ApiException, HTTPError, ActuationError) as exc:
            forbidden = getattr(exc, "status", None) == 403
            # no rights (rebalancing never installed): not asked again
            if not whole or forbidden:
                self._fences_next_read = math.inf if forbidden else now + FENCE_READ_RETRY_S
            log.log(
                logging.DEBUG if forbidden else logging.INFO,
                "cannot list the nodes to find drain fences left by an earlier run: %s",
                exc,
            )
            return
        self._fences_next_read = math.inf
        listed = {}
        for item in items:
            fence = node_fence(item)
            if fence is not None:
                listed[str((item.get("metadata") or {}).get("name", ""))] = fence
        if whole:
            self._fences = listed
        else:
            for node, until in listed.items():
                self._fences.setdefault(node, until)

    def _fence_patch(self, node: str, until: float | None, over_at: float | None = None) -> bool:
        """Set (``until``) or lift (None) the fence of ``node``; see ``fence_node`` and ``unfence_node``."""
        target = f"Node/{node}"
        for attempt in range(3):
            try:
                item = self._raw(self.core.read_node, node, target=target)
            except ApiException as exc:
                if exc.status == 404 and until is None:
                    self._fences.pop(node, None)
                    return False
                raise _error(exc, target, "get", "nodes", "") from exc
            except HTTPError as exc:
                raise _error(exc, target, "get", "nodes", "") from exc
            meta, spec = item.get("metadata") or {}, item.get("spec") or {}
            others = [
                t for t in spec.get("taints") or [] if isinstance(t, Mapping) and t.get("key") != DRAIN_FENCE_TAINT
            ]
            current = node_fence(item)  # None: not fenced
            if until is None and current is None:
                self._fences.pop(node, None)
                return False
            if until is None and over_at is not None and current is not None and current > over_at:
                self._fences[node] = current  # fenced anew since it was read: lifted at its own time
                return False
            if until is not None and current is not None:
                until = max(until, current)
            body: dict[str, Any] = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {DRAIN_FENCE_UNTIL: _utc(until) if until is not None else None},
                },
                "spec": {
                    "taints": others
                    + ([{"key": DRAIN_FENCE_TAINT, "effect": "NoSchedule"}] if until is not None else [])
                    or None
                },
            }
            try:
                self._raw(
                    self.core.patch_node, node, body, target=target, _content_type=MERGE, field_manager=FIELD_MANAGER
                )
            except ApiException as exc:
                if exc.status == 409 and attempt < 2:
                    continue  # the node changed since it was read (a kubelet status, another taint)
                raise _error(exc, target, "patch", "nodes", "") from exc
            except HTTPError as exc:
                raise _error(exc, target, "patch", "nodes", "") from exc
            if until is None:
                self._fences.pop(node, None)
            else:
                self._fences[node] = until
                self._lift_asap.pop(node, None)  # fenced anew: lifted at its time
            return True
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _pod_usage(self) -> dict[tuple[str, str], tuple[float, float]]:
        """CPU (millicores) and memory (MiB) usage per (namespace, pod) from the metrics API, the
        containers' sums; {} when it is not served. A container's reading that does not parse counts
        as none (0); the other readings still count."""
        try:
            doc = self._raw(self.custom.list_cluster_custom_object, "metrics.k8s.io", "v1beta1", "pods")
        except (ApiException, HTTPError, ActuationError) as exc:
            log.info("no pod metrics (metrics.k8s.io): %s; rebalancing places pods by their requests", exc)
            return {}
        out: dict[tuple[str, str], tuple[float, float]] = {}
        for item in doc.get("items") or []:
            meta = item.get("metadata") or {}
            cpu = memory = 0.0
            for c in item.get("containers") or []:
                used = c.get("usage") or {}
                # a reading that does not parse is as none: the other readings still count
                with contextlib.suppress(ValueError):
                    cpu += cpu_millis(used.get("cpu"))
                with contextlib.suppress(ValueError):
                    memory += _memory_bytes(used.get("memory")) / 2**20
            out[str(meta.get("namespace", "")), str(meta.get("name", ""))] = (float(cpu), float(memory))
        return out

    def _as_admitted(self, namespace: str, template: Mapping[str, Any]) -> Mapping[str, Any]:
        """A pod template as the quota admission will see its pods when quotas are read (``quotas``):
        with the namespace's LimitRange defaults and its RuntimeClass's overhead; else as it is."""
        if not self.quotas:
            return template
        return self._with_overhead(with_defaults(template, self._limit_defaults(namespace)))

    def _with_overhead(self, template: Mapping[str, Any]) -> Mapping[str, Any]:
        """``template`` with ``spec.overhead`` from its ``runtimeClassName``'s ``overhead.podFixed``
        (the RuntimeClass admission plugin writes it into each pod; a template rarely carries it),
        read at most once a minute per class. Unreadable: as it is, with one warning per class."""
        spec = template.get("spec") or {}
        name = spec.get("runtimeClassName")
        if not name or spec.get("overhead"):
            return template
        now = self.clock.now()
        cached = self._overheads.get(str(name))
        if cached is None or now - cached[0] >= self.LIMIT_RANGES_TTL_S:
            try:
                rc = self._raw(self.node_api.read_runtime_class, str(name))
                overhead: Mapping[str, Any] = (rc.get("overhead") or {}).get("podFixed") or {}
            except (ApiException, HTTPError, ActuationError, ValueError) as exc:
                if name not in self._overheads_unread:
                    self._overheads_unread.add(str(name))
                    status = getattr(exc, "status", None)
                    why = {
                        403: "grant 'get runtimeclasses.node.k8s.io' with a ClusterRoleBinding (deploy/base/rbac.yaml)",
                        404: "it does not exist, so the API server refuses the template's pods: fix runtimeClassName",
                    }.get(int(status or 0), "tried again in a minute")
                    log.warning(
                        "cannot read RuntimeClass %s (%s): quota room counts its pods without their overhead; %s",
                        name,
                        status or type(exc).__name__,
                        why,
                    )
                overhead = {}
            cached = self._overheads[str(name)] = (now, overhead)
        return {**template, "spec": {**spec, "overhead": dict(cached[1])}} if cached[1] else template

    # -- Target protocol ------------------------------------------------------------------------
    #: ``read_state`` lists a namespace's Deployments (or StatefulSets) in one request when it reads
    #: more than this many of them there; this many or fewer are read with one GET each (a list of a
    #: namespace holding thousands of other objects for one workload of ours would cost more).
    LIST_ABOVE = 5
    #: Objects per page of such a list (``limit``; the API server's continue token fetches the rest).
    LIST_PAGE = 500
    #: A namespace whose list runs past one page and holds more than this many times the objects we
    #: read there (the first page's ``metadata.remainingItemCount``, or the objects paged through so
    #: far where the server does not say) is not listed further: ours are read one by one ...
    LIST_SPARSE = 4
    #: ... and it is not listed again until the number of ours there changes or this long has passed.
    LIST_RECHECK_S = 3600.0
    #: A list still going after this many pages (or answering a continue token it gave before: a
    #: proxy that drops the ``continue`` parameter) is given up: its workloads are read one by one.
    LIST_MAX_PAGES = 200

    def _list_workloads(self, workloads: Sequence[WorkloadRef]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
        """``(resource, namespace) -> {name: object}`` for each namespace where ``read_state`` reads
        more than ``LIST_ABOVE`` Deployments (Headroom placeholders included) or StatefulSets: one
        list (paged) instead of a GET each. A namespace found holding far more objects than ours
        (``LIST_SPARSE``) is listed no further: what its first page held is used, the rest are read
        one by one, and it is not listed again for ``LIST_RECHECK_S`` or until the number of ours
        there changes. A list that fails (no ``list`` permission, an error, an answer that is not a
        list of objects, a continue token repeated or pages past ``LIST_MAX_PAGES``) is left out, with
        a warning once per reason: its workloads are read one by one, as before 2026-12-06 every
        workload was."""
        kinds = {"Deployment": "deployments", "Headroom": "deployments", "StatefulSet": "statefulsets"}
        wanted: dict[tuple[str, str], set[str]] = {}
        for ref in workloads:
            resource = kinds.get(ref.kind)
            if resource is not None:
                wanted.setdefault((resource, ref.namespace), set()).add(ref.name)
        fns = {
            "deployments": self.apps.list_namespaced_deployment,
            "statefulsets": self.apps.list_namespaced_stateful_set,
        }
        found: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        now = self.clock.now()
        for (resource, namespace), names in wanted.items():
            if len(names) <= self.LIST_ABOVE:
                continue
            sparse = self._list_sparse.get((resource, namespace))
            if sparse is not None and sparse[0] == len(names) and now - sparse[1] < self.LIST_RECHECK_S:
                continue  # read one by one, as decided when it was last listed
            self._list_sparse.pop((resource, namespace), None)
            fn = fns[resource]
            objects: dict[str, dict[str, Any]] = {}
            token = ""
            tokens: set[str] = set()
            scanned = 0
            try:
                for _ in range(self.LIST_MAX_PAGES):
                    more = {"_continue": token} if token else {}
                    page = self._raw(fn, namespace, target=f"{resource} in {namespace}", limit=self.LIST_PAGE, **more)
                    items = page.get("items")
                    if not isinstance(items, list):
                        raise ValueError(f"its items are a {type(items).__name__}, not a list")
                    for item in items:
                        name = ((item.get("metadata") or {}) if isinstance(item, dict) else {}).get("name")
                        if isinstance(name, str) and name in names:
                            objects[name] = item
                    scanned += len(items)
                    meta = page.get("metadata") or {}
                    token = str(meta.get("continue") or "")
                    if not token:
                        break
                    left = meta.get("remainingItemCount")
                    total = scanned + (left if isinstance(left, int) and not isinstance(left, bool) and left > 0 else 0)
                    if total > self.LIST_SPARSE * len(names):
                        self._list_sparse[resource, namespace] = (len(names), now)
                        log.info(
                            "namespace %s holds %s%d %s for the %d of ours read there: not listed (again until "
                            "that number changes, or for %.0f s); those not on its first page are read one by one",
                            namespace,
                            "" if left is not None else "at least ",
                            total,
                            resource,
                            len(names),
                            self.LIST_RECHECK_S,
                            extra={"event": "list_sparse", "namespace": namespace},
                        )
                        break
                    if token in tokens:
                        raise ValueError(
                            "the server answered a continue token it had given before (a proxy that drops "
                            "the 'continue' parameter?)"
                        )
                    tokens.add(token)
                else:
                    raise ValueError(f"still more after {self.LIST_MAX_PAGES} pages of {self.LIST_PAGE}")
            except (ApiException, HTTPError, ActuationError, ValueError, TypeError, AttributeError) as exc:
                why = (
                    _error(exc, f"{resource} in {namespace}", "list", resource, namespace).message
                    if isinstance(exc, ApiException | HTTPError)
                    else (exc.message if isinstance(exc, ActuationError) else f"unexpected answer ({exc})")
                )
                if self._list_failed.get((resource, namespace)) != why:
                    # The RBAC hint only where RBAC refused the list (not for a 410 on an expired
                    # continue token, a 500, no answer: until 2026-12-06 every failure said so).
                    grant = (
                        f". Grant list on {resource} (deploy/base/rbac.yaml) to read them in one request"
                        if getattr(exc, "status", None) == 403
                        else ""
                    )
                    log.warning(
                        "cannot list %s in namespace %s (%s); reading its %d workloads one by one%s",
                        resource,
                        namespace,
                        why.removesuffix("; retried next cycle"),
                        len(names),
                        grant,
                        extra={"event": "list_failed", "namespace": namespace},
                    )
                self._list_failed[resource, namespace] = why
                continue
            self._list_failed.pop((resource, namespace), None)
            found[resource, namespace] = objects
        return found

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        """Replicas, ready replicas and readiness times per workload.

        A workload whose object cannot be read (an API error such as 500, 403 or 404, no answer, an
        answer that is not JSON, a field of the wrong type) is left out of ``workloads`` and named in
        ``unreadable`` with the reason; a warning names it when it becomes unreadable or its reason
        changes (not again every cycle while it stays so). The loop does not plan it this cycle.
        """
        states: dict[WorkloadRef, WorkloadState] = {}
        unreadable: dict[WorkloadRef, str] = {}
        pods: dict[str, _PodIndex] = {}
        listed: dict[str, list[Mapping[str, Any]] | Exception] = {}  # each namespace's pods, listed once
        pods_now: dict[WorkloadRef, int] = {}  # per workload read, the pods it has now
        asked_now: dict[WorkloadRef, dict[str, int]] = {}  # ... and what those pods ask for (pod_shape)
        shapes: dict[WorkloadRef, dict[str, int]] = {}
        templates: dict[WorkloadRef, Mapping[str, Any]] = {}  # what the workloads' pods look like
        since = self.clock.now() - self.sample_window_s
        # Namespaces with more than LIST_ABOVE of one kind: listed once (until 2026-12-06 one GET each).
        bulk = self._list_workloads(workloads)
        for ref in workloads:
            read: Any = self.custom.get_namespaced_custom_object
            try:
                if ref.kind == "KnativeService":
                    obj = self._raw(read, *KNATIVE[:2], ref.namespace, KNATIVE[2], ref.name, target=ref.key)
                    template = (obj.get("spec") or {}).get("template") or {}
                    # either spelling of min-scale (both: unreadable, with the reason)
                    warm = _int_field(obj, _min_scale_field(min_scale_key(template, ref.key)), ref.key, default=0)
                    states[ref] = WorkloadState(ref, warm, warm, warm_instances=warm)
                    # The warm instances are pods in the namespace, under its quotas like any other.
                    pods_now[ref] = max(warm, 0)
                    templates[ref] = self._as_admitted(ref.namespace, knative_pod_template(template))
                    shape = shapes[ref] = pod_shape(templates[ref])
                    asked_now[ref] = {key: max(warm, 0) * amount for key, amount in shape.items()}
                    continue
                read = {
                    "Deployment": self.apps.read_namespaced_deployment,
                    "StatefulSet": self.apps.read_namespaced_stateful_set,
                    "Headroom": self.apps.read_namespaced_deployment,
                }.get(ref.kind)
                if read is None:
                    unreadable[ref] = f"{ref.key}: the Kubernetes target reads no object of kind {ref.kind}"
                    continue
                resource = "statefulsets" if ref.kind == "StatefulSet" else "deployments"
                # From its namespace's list; not in it (gone, or created since): its own GET, whose
                # 404 / 403 / not-JSON answer says so as before.
                obj = bulk.get((resource, ref.namespace), {}).get(ref.name) or self._raw(
                    read, ref.name, ref.namespace, target=ref.key
                )
                spec = _int_field(obj, "spec.replicas", ref.key, default=1)
                ready = _int_field(obj, "status.readyReplicas", ref.key, default=0)
                have = _int_field(obj, "status.replicas", ref.key, default=0)
                pods_now[ref] = max(have, 0)
                templates[ref] = self._as_admitted(ref.namespace, (obj.get("spec") or {}).get("template") or {})
                shape = shapes[ref] = pod_shape(templates[ref])
                asked_now[ref] = {key: max(have, 0) * amount for key, amount in shape.items()}
                started: tuple[_ReadyPod, ...] = ()
                if ref.kind != "Headroom":
                    if ref.namespace not in pods:
                        if ref.namespace not in listed:
                            listed[ref.namespace] = self._list_pods(ref.namespace)
                        pods[ref.namespace] = self._ready_pods(ref.namespace, since, listed[ref.namespace])
                    started = pods[ref.namespace].matching((obj.get("spec") or {}).get("selector"))
                states[ref] = WorkloadState(
                    ref,
                    spec,
                    ready,
                    startup_samples=tuple(p.readiness_s for p in started),
                    startup_pods=tuple(p.uid for p in started),
                )
            except (ApiException, HTTPError, ActuationError, ValueError, TypeError) as exc:
                unreadable[ref] = _read_failure(exc, ref, read)
                for partial in (states, pods_now, asked_now, shapes, templates):
                    partial.pop(ref, None)  # nothing half-read of it counts (quota pools included)
        for ref, why in unreadable.items():
            if self._unreadable.get(ref) != why:
                log.warning(
                    "cannot read the state of %s: %s; it is not planned until it is read",
                    ref.key,
                    why.removeprefix(f"{ref.key}: "),
                    extra={"event": "state_unreadable", "workload": ref.key},
                )
        self._unreadable = unreadable
        self._templates = templates
        pod_quotas, resource_quotas, members, refused, running = (
            self._namespace_quotas(pods_now, asked_now, templates, shapes, listed)
            if self.quotas
            else ({}, {}, {}, {}, {})
        )
        state = ClusterState(
            workloads=states,
            pods_running=running,
            pod_quotas=pod_quotas,
            resource_quotas=resource_quotas,
            pod_shapes=shapes,
            quota_members=members,
            quota_refused=refused,
            unreadable=unreadable,
        )
        if not self.placement:
            return state
        try:
            nodes, placed, pdbs, pending = self.read_placement()
        except (ApiException, HTTPError, ActuationError, ValueError, TypeError) as exc:
            # No placement read: no moves this cycle (the planner proposes none without nodes).
            hint = (
                "; scaleahead's ServiceAccount may not read them: the shipped manifests grant it only with the "
                "component deploy/components/rebalance (docs/operations.md, Install)"
                if isinstance(exc, ApiException) and exc.status == 403
                else ""
            )
            log.warning(
                "cannot read nodes, pods and PDBs for rebalancing: %s%s", exc, hint, extra={"event": "placement"}
            )
            return state
        rules = {}
        for ref, template in templates.items():
            try:
                rules[ref] = template_rules(ref, template)
            except (ValueError, TypeError, AttributeError):  # node rules not readable: counted on any node
                continue
        return replace(state, nodes=nodes, pods=placed, pdbs=pdbs, pending_pods=pending, pod_rules=rules)

    def _namespace_quotas(
        self,
        pods_now: Mapping[WorkloadRef, int],
        asked_now: Mapping[WorkloadRef, Mapping[str, int]],
        templates: Mapping[WorkloadRef, Mapping[str, Any]],
        shapes: Mapping[WorkloadRef, Mapping[str, int]] | None = None,
        listed: dict[str, list[Mapping[str, Any]] | Exception] | None = None,
    ) -> tuple[
        dict[str, int],
        dict[str, dict[str, int]],
        dict[str, frozenset[WorkloadRef]],
        dict[WorkloadRef, str],
        dict[WorkloadRef, int],
    ]:
        """The pools the namespaces' ResourceQuotas make of the managed workloads read
        (``ClusterState.pod_quotas``, ``resource_quotas``, ``quota_members``), and the workloads
        whose new pods a quota refuses outright (``quota_refused``: a container leaves unset a
        resource the quota constrains; known only where the namespace's LimitRanges could be read,
        as in ``_quota_room``), and the Knative Services in a pool that run more pods than their
        ``min-scale`` (``pods_running``).

        A pool holds what its quotas leave (``hard - used``; 0 when a quota is already over its
        limit, since Kubernetes removes no running pod for it) plus what its workloads' pods have or
        ask for now (``status.replicas``, times ``pod_shape``). Quotas without scopes, and scoped
        ones that count the pods of every managed workload in the namespace, make the namespace's
        pool (key: the namespace; the smallest room over them). A scoped quota that counts the pods
        of only some of them (``actuator.quota_scopes``: e.g. ``PriorityClass In [high]``) is a pool
        of its own, key ``namespace/quota-name``, shared among those workloads only; one that counts
        none of them (e.g. a ban on best-effort pods) is no pool. A namespace whose quotas cannot be
        read is left out: the planner then shares nothing there.

        A Knative Service in a pool has the pods it runs now (``_knative_tally``: its autoscaler's,
        at least its ``min-scale``; those are in the quota's ``used``), counted from one pod list
        per namespace (``listed``, shared with the readiness times), listed only for a namespace
        with such a pool; unlistable: its ``min-scale``.
        """
        pods: dict[str, int] = {}
        running: dict[WorkloadRef, int] = {}
        listed = {} if listed is None else listed
        tallies: dict[str, dict[str, int] | None] = {}  # per namespace, its Knative pods (``_knative_tally``)

        def held(r: WorkloadRef) -> int:
            """The pods ``r`` has now, as the quotas count them."""
            n = pods_now.get(r, 0)
            if r.kind != "KnativeService":
                return n
            if r not in running:
                if r.namespace not in tallies:
                    if r.namespace not in listed:
                        listed[r.namespace] = self._list_pods(r.namespace)
                    tallies[r.namespace] = self._knative_tally(r.namespace, listed[r.namespace])
                tally = tallies[r.namespace]
                running[r] = n if tally is None else max(n, tally.get(r.name, 0))
            return running[r]

        def asked(r: WorkloadRef, key: str) -> int:
            if r.kind == "KnativeService" and shapes is not None and r in shapes:
                return held(r) * shapes[r].get(key, 0)
            return (asked_now.get(r) or {}).get(key, 0)

        resources: dict[str, dict[str, int]] = {}
        members: dict[str, frozenset[WorkloadRef]] = {}
        refused: dict[WorkloadRef, str] = {}

        def check_unset(rq: Mapping[str, Any], keys: Sequence[str], refs: Sequence[WorkloadRef]) -> None:
            if not keys or self._limit_defaults_read(refs[0].namespace) is None:
                return
            name = str((rq.get("metadata") or {}).get("name") or "unnamed")
            for r in refs:
                unset = unset_resources(templates.get(r) or {}, keys)
                if unset and r not in refused:
                    refused[r] = (
                        f"ResourceQuota {r.namespace}/{name} on {' and '.join(unset)} refuses pods whose "
                        f"containers do not set it, and a container of {r.key}'s pod template sets none: set "
                        f"resources.{unset[0]} on every container, or a LimitRange default"
                    )

        def add_pool(key: str, left: Mapping[str, int], refs: Sequence[WorkloadRef]) -> None:
            if "pods" in left:
                pods[key] = max(left["pods"], 0) + sum(held(r) for r in refs)
            amounts = {k: max(v, 0) + sum(asked(r, k) for r in refs) for k, v in left.items() if k != "pods"}
            if amounts:
                resources[key] = amounts

        for ns in sorted({ref.namespace for ref in pods_now}):
            here = sorted((ref for ref in pods_now if ref.namespace == ns), key=lambda r: r.key)
            try:
                quotas = self._raw(self.core.list_namespaced_resource_quota, ns).get("items") or []
            except (ApiException, HTTPError, ActuationError):
                continue
            shared: dict[str, int] = {}
            for rq in quotas:
                spec = rq.get("spec") or {}
                room = _rooms(rq)
                if not room:
                    continue
                keys = sorted(k for k in room if k != "pods")
                if spec.get("scopes") or spec.get("scopeSelector"):
                    refs = [r for r in here if quota_applies(rq, templates.get(r) or {})]
                    if not refs:
                        continue
                    check_unset(rq, keys, refs)
                    if len(refs) < len(here):
                        name = str((rq.get("metadata") or {}).get("name") or "unnamed")
                        key = f"{ns}/{name}"
                        add_pool(key, room, refs)
                        if key in pods or key in resources:
                            members[key] = frozenset(refs)
                        continue
                else:
                    check_unset(rq, keys, here)
                for k, v in room.items():
                    shared[k] = min(shared.get(k, v), v)
            if shared:
                add_pool(ns, shared, here)
        # the Knative Services whose autoscaler runs more pods than their min-scale (the planner takes
        # off a pool those a claim does not want: ``ClusterState.pods_running``)
        return pods, resources, members, refused, {r: n for r, n in running.items() if n > pods_now.get(r, 0)}

    def apply(self, action: Action) -> ActionResult:
        """Apply one action without the safety layer or journal (``actuator.applying.Actuator`` adds them)."""
        if action.is_noop:
            return ActionResult(action, "skipped", "no change", "noop")
        try:
            live = self.live(action)
            value = action.to_replicas if isinstance(action, ScaleTo) else 0
            if isinstance(action, SetWarmPool):
                value = action.to_instances
            if isinstance(action, MovePod) and not live.value:
                return ActionResult(action, "skipped", f"{action.target} is no longer on {action.from_node}")
            if not isinstance(action, MovePod) and live.value == value:
                return ActionResult(action, "skipped", f"{live.field} is already {value}", "noop")
            self.write(action, value, live)
        except ActuationError as exc:
            if exc.outcome in ("failed", "conflict"):
                return ActionResult(action, "failed", exc.message)
            return ActionResult(action, "skipped", exc.message)
        if isinstance(action, MovePod):
            return ActionResult(action, "applied", f"{action.target}: evicted from {action.from_node}")
        return ActionResult(action, "applied", f"{live.target} {live.field}: {live.value} -> {value}")

    # -- live reads -----------------------------------------------------------------------------
    def live(self, action: Action, quota_room: bool = True) -> LiveObject:
        """Read the managed field of the object behind ``action`` (raises ``ActuationError``).

        ``quota_room``: for a scale-up, also read what the namespace's quotas leave (``quota_pods_free``,
        and the pods a Knative Service runs); False reads the field only (``Actuator.reconcile``)."""
        if isinstance(action, MovePod):
            return self._live_pod(action)
        ref = action.workload
        if ref.kind == "KnativeService":
            obj = self._call(
                action, self.custom.get_namespaced_custom_object, *KNATIVE[:2], ref.namespace, KNATIVE[2], ref.name
            )
            _check_mappings(obj, ("spec", "template", "metadata", "annotations"), ref.key)
            template = (obj.get("spec") or {}).get("template") or {}
            key = min_scale_key(template, ref.key)  # the spelling the Service uses (both: skipped)
            field = _min_scale_field(key)
            value = _int_field(obj, field, ref.key, default=0)
            annotations = (template.get("metadata") or {}).get("annotations") or {}
            room: dict[str, int] = {} if key in annotations else {"unset": 1}
            # A higher min-scale (a warm pool's, or a service's ScaleTo) creates pods: they need quota room.
            to = action.to_instances if isinstance(action, SetWarmPool) else getattr(action, "to_replicas", value)
            if quota_room and to > value:
                quota = self._quota_facts(ref.namespace, lambda: knative_pod_template(template), ref.key)
                if quota:
                    # Its autoscaler often runs more pods than min-scale, and the quota counts them as
                    # used: a min-scale up to them creates no pod and needs no room (as an HPA floor).
                    # Pods that cannot be listed: counted as min-scale.
                    tally = self._knative_tally(
                        ref.namespace, self._list_pods(ref.namespace, f"{KNATIVE_SERVICE_LABEL}={ref.name}")
                    )
                    running = None if tally is None else tally.get(ref.name, 0)
                    room.update(quota, pods_now=value if running is None else max(value, running))
            return LiveObject(ref.key, field, value, _rv(obj), room, uid=_uid(obj))
        if ref.kind == "Headroom":
            try:
                obj = self._raw(self.apps.read_namespaced_deployment, ref.name, ref.namespace, target=ref.key)
            except ApiException as exc:
                if exc.status == 404:  # created by the write, with the template of _headroom
                    missing = {"missing": 1}
                    if quota_room and isinstance(action, ScaleTo) and action.to_replicas > 0:
                        new = self._headroom(ref, action.to_replicas)["spec"]["template"]
                        missing.update(self._quota_facts(ref.namespace, lambda: new, ref.key))
                    return LiveObject(ref.key, "spec.replicas", 0, "", missing)
                raise _error(exc, ref.key, "get", "deployments", ref.namespace) from exc
            except HTTPError as exc:
                raise _error(exc, ref.key, "get", "deployments", ref.namespace) from exc
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(HEADROOM_LABEL) != "true":
                raise ActuationError(
                    "skipped",
                    f"Deployment {ref.namespace}/{ref.name} exists but is not a headroom placeholder "
                    f"(label {HEADROOM_LABEL}=true missing); choose another headroom name or delete it",
                )
            value = _int_field(obj, "spec.replicas", ref.key, 1)
            placeholder: dict[str, int] = {}
            # placeholder pods count in quotas
            if quota_room and isinstance(action, ScaleTo) and action.to_replicas > value:
                template = (obj.get("spec") or {}).get("template") or {}
                placeholder = self._quota_facts(ref.namespace, lambda: template, ref.key)
            # with its UID: a placeholder deleted and re-created is another object, not a human edit
            return LiveObject(ref.key, "spec.replicas", value, _rv(obj), placeholder, uid=_uid(obj))
        mode, hpa = self.mode(ref)
        if mode == "floor":
            if not hpa:
                raise ActuationError("skipped", f"{ref.key}: mode floor needs spec.target.hpaName in its policy")
            target = self.field_target(action)
            obj = self._call(
                action, self.autoscaling.read_namespaced_horizontal_pod_autoscaler, hpa, ref.namespace, target=target
            )
            value = _int_field(obj, "spec.minReplicas", target, default=1)
            hpa_max = _int_field(obj, "spec.maxReplicas", target)
            floor_facts = {"hpa_max": hpa_max}
            if isinstance(action, ScaleTo) and action.to_replicas > value:
                # A higher floor makes the HPA create pods beyond those it runs now: those need quota room.
                # The pods it runs now are what the quota counts as used; below minReplicas (the HPA
                # has not caught up with a raised floor) the missing ones still need the room.
                current = (obj.get("status") or {}).get("currentReplicas")
                pods_now = value
                if isinstance(current, int) and not isinstance(current, bool) and current >= 0:
                    pods_now = current
                if quota_room and action.to_replicas > pods_now:
                    quota = self._quota_facts(ref.namespace, lambda: self._pod_template(action, ref), ref.key)
                    if quota:
                        floor_facts.update(quota, pods_now=pods_now)
            return LiveObject(target, "spec.minReplicas", value, _rv(obj), floor_facts, uid=_uid(obj))
        read = {
            "Deployment": self.apps.read_namespaced_deployment_scale,
            "StatefulSet": self.apps.read_namespaced_stateful_set_scale,
        }.get(ref.kind)
        if read is None:
            raise ActuationError("skipped", f"{ref.key}: kind {ref.kind} cannot be scaled by scaleahead")
        obj = self._call(action, read, ref.name, ref.namespace)
        value = _int_field(obj, "spec.replicas", ref.key, default=0)
        facts: dict[str, int] = {}
        if quota_room and isinstance(action, ScaleTo) and action.to_replicas > value:
            facts = self._quota_facts(ref.namespace, lambda: self._pod_template(action, ref), ref.key)
        # The Scale's metadata.uid is the Deployment's or StatefulSet's own (the API server copies it).
        return LiveObject(ref.key, "spec.replicas", value, _rv(obj), facts, uid=_uid(obj))

    def field_manager(self, action: Action) -> str:
        """Who last set the field ``action`` manages, as the object's ``metadata.managedFields`` name
        it (the field manager: ``argocd-controller``, ``kustomize-controller``, ``kubectl-edit``...);
        ``""`` when unknown (no entry owns the field, the object cannot be read, a pod move).

        One more read of the whole object (a Deployment's ``scale`` subresource carries no
        managedFields), made only when an edit of the field is first seen."""
        if isinstance(action, MovePod):
            return ""
        ref = action.workload
        mode, hpa = self.mode(ref)
        path: tuple[str, ...] = ("f:spec", "f:replicas")
        try:
            if ref.kind == "KnativeService":
                obj = self._call(
                    action, self.custom.get_namespaced_custom_object, *KNATIVE[:2], ref.namespace, KNATIVE[2], ref.name
                )
                template = (obj.get("spec") or {}).get("template") if isinstance(obj, Mapping) else None
                # the spelling the template uses (the older minScale too: found by a review)
                key = min_scale_key(template if isinstance(template, Mapping) else {}, ref.key)
                path = ("f:spec", "f:template", "f:metadata", "f:annotations", f"f:{key}")
            elif mode == "floor" and hpa:
                path = ("f:spec", "f:minReplicas")
                obj = self._call(action, self.autoscaling.read_namespaced_horizontal_pod_autoscaler, hpa, ref.namespace)
            elif ref.kind in ("Deployment", "StatefulSet", "Headroom"):
                read = self.apps.read_namespaced_stateful_set if ref.kind == "StatefulSet" else None
                obj = self._call(action, read or self.apps.read_namespaced_deployment, ref.name, ref.namespace)
            else:
                return ""
        except ActuationError:
            return ""
        return field_owner(obj, path)

    def _quota_facts(self, namespace: str, template: Callable[[], Mapping[str, Any]], key: str = "") -> dict[str, int]:
        """``quota_pods_free`` and the binding quota keys (``quota_limited_by:KEY``) for a scale-up of
        pods of ``template`` in ``namespace`` (``actuator.safety`` limits it); empty: no quota, or the
        quotas cannot be read (the API server's quota admission still decides). ``key``: the
        action's target (``_quota_room``)."""
        free, binding = self._quota_room(namespace, template, key)
        if free is None:
            return {}
        return {"quota_pods_free": free, **{f"quota_limited_by:{key}": 1 for key in binding}}

    def _pod_template(self, action: Action, ref: WorkloadRef) -> Mapping[str, Any]:
        """The pod template of ``ref``: as this cycle's ``read_state`` saw it, else read now."""
        if ref in self._templates:
            return self._templates[ref]
        read = (
            self.apps.read_namespaced_stateful_set
            if ref.kind == "StatefulSet"
            else self.apps.read_namespaced_deployment
        )
        obj = self._call(action, read, ref.name, ref.namespace)
        template: Mapping[str, Any] = (obj.get("spec") or {}).get("template") or {}
        return template

    def _live_pod(self, action: MovePod) -> LiveObject:
        pod = self._call(action, self.core.read_namespaced_pod, action.pod, action.namespace)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        # A terminating pod is on its way out already (evicted by another replica or shard, or
        # deleted): evicting it again passes no PodDisruptionBudget check and would steer its
        # owner's next pod a second time. It counts as no longer on the node.
        terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        # Another pod under the planned one's name (its UID differs: a StatefulSet re-created it,
        # wherever it landed): the planned pod is gone, and this one was never planned to move.
        recreated = bool(action.pod_uid and uid and uid != action.pod_uid)
        on_from = node == action.from_node and not terminating and not recreated
        facts = {"on_from_node": int(on_from), "on_to_node": int(node == action.to_node)}
        facts["terminating"] = int(terminating)
        facts["recreated"] = int(recreated)
        # a pod of that name on the node, whichever (a StatefulSet's re-created in place keeps the
        # node from being freed): ``Actuator`` tells a pod gone from the node by it
        facts["name_on_from_node"] = int(node == action.from_node and not terminating)
        try:
            pdbs = self._raw(self.policy.list_namespaced_pod_disruption_budget, action.namespace)
        except (ApiException, HTTPError) as exc:
            if getattr(exc, "status", None) == 404:  # not the pod's 404: policy/v1 is not served
                raise ActuationError(
                    "skipped",
                    f"{action.target}: the API server does not serve policy/v1 PodDisruptionBudgets (404 listing them "
                    f"in {action.namespace}), so the move's budgets cannot be checked: pod moves need Kubernetes 1.21 "
                    "or later",
                ) from exc
            raise _error(exc, action.target, "list", "poddisruptionbudgets.policy", action.namespace) from exc
        allowed: int | None = None
        for pdb in pdbs.get("items") or []:
            # policy/v1: no selector selects no pod, the empty one every pod of the namespace (until
            # 2026-12-07 an empty one was read as selecting none, as read_state already did not)
            selector = label_selector((pdb.get("spec") or {}).get("selector"))
            if selector is not None and selector.matches(labels):
                n = int((pdb.get("status") or {}).get("disruptionsAllowed", 0) or 0)
                allowed = n if allowed is None else min(allowed, n)
                # Each budget by name: a drain counts its pods per budget (``Actuator._drain_check``).
                facts[PDB_FACT + str((pdb.get("metadata") or {}).get("name") or "")] = n
        if allowed is not None:
            facts["pdb_disruptions_allowed"] = allowed
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        facts["has_controller"] = int(any(o.get("controller") for o in owners))
        owner = controller_owner(pod)
        return LiveObject(action.target, "spec.nodeName", int(on_from), _rv(pod), facts, owner, uid)

    # -- writes ---------------------------------------------------------------------------------
    def write(self, action: Action, value: int, live: LiveObject) -> LiveObject:
        """Set the managed field to ``value`` with ``live.resource_version`` as precondition.

        Within a plan (``plan_reads``) the pods it adds take their namespace's quota room from the
        plan's later scale-ups, unless the API server refuses the write (a 4xx other than 409)."""
        if isinstance(action, MovePod):
            return self._move(action, live)
        self.take_room(action, value, live)
        try:
            return self._write(action, value, live)
        except ActuationError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 409:
                self._give_back_room(action)
            raise

    def _write(self, action: Action, value: int, live: LiveObject) -> LiveObject:
        assert not isinstance(action, MovePod)
        ref = action.workload
        meta = {"resourceVersion": live.resource_version} if live.resource_version else {}
        if ref.kind == "KnativeService":
            # a merge patch's null removes the annotation: the platform's default applies again
            ann = None if isinstance(action, SetWarmPool) and action.restore_default else str(value)
            # the spelling ``live`` read (the resourceVersion precondition holds it): never both on the object
            key = MIN_SCALE_OLD if live.field == _min_scale_field(MIN_SCALE_OLD) else MIN_SCALE
            body = {"metadata": meta, "spec": {"template": {"metadata": {"annotations": {key: ann}}}}}
            obj = self._call(
                action,
                self.custom.patch_namespaced_custom_object,
                *KNATIVE[:2],
                ref.namespace,
                KNATIVE[2],
                ref.name,
                body,
                _content_type=MERGE,
                field_manager=FIELD_MANAGER,
            )
        elif ref.kind == "Headroom":
            # field manager `scaleahead`, as every other write (until 2026-12-07 the placeholder's
            # create and patch carried the client's default, so the co-writer check could not tell
            # them from someone else's: a review)
            if live.fact("missing"):
                obj = self._call(
                    action,
                    self.apps.create_namespaced_deployment,
                    ref.namespace,
                    self._headroom(ref, value),
                    field_manager=FIELD_MANAGER,
                )
            else:
                body = {"metadata": meta, "spec": {"replicas": value}}
                obj = self._call(
                    action,
                    self.apps.patch_namespaced_deployment,
                    ref.name,
                    ref.namespace,
                    body,
                    _content_type=MERGE,
                    field_manager=FIELD_MANAGER,
                )
        else:
            mode, hpa = self.mode(ref)
            if mode == "floor":
                body = {"metadata": meta, "spec": {"minReplicas": value}}
                obj = self._call(
                    action,
                    self.autoscaling.patch_namespaced_horizontal_pod_autoscaler,
                    hpa,
                    ref.namespace,
                    body,
                    target=live.target,
                    _content_type=MERGE,
                    field_manager=FIELD_MANAGER,
                )
            else:
                patch = {
                    "Deployment": self.apps.patch_namespaced_deployment_scale,
                    "StatefulSet": self.apps.patch_namespaced_stateful_set_scale,
                }[ref.kind]
                body = {"metadata": meta, "spec": {"replicas": value}}
                obj = self._call(
                    action, patch, ref.name, ref.namespace, body, _content_type=MERGE, field_manager=FIELD_MANAGER
                )
        return LiveObject(live.target, live.field, value, _rv(obj), live.facts, uid=_uid(obj) or live.uid)

    def _headroom(self, ref: WorkloadRef, replicas: int) -> dict[str, Any]:
        labels = {
            "app.kubernetes.io/name": ref.name,
            HEADROOM_LABEL: "true",
            "app.kubernetes.io/managed-by": MANAGED_BY,
        }
        h = self.headroom
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": ref.name, "namespace": ref.namespace, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app.kubernetes.io/name": ref.name, HEADROOM_LABEL: "true"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "priorityClassName": h.priority_class,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "pause",
                                "image": h.image,
                                "resources": {"requests": {"cpu": h.cpu, "memory": h.memory}},
                            }
                        ],
                    },
                },
            },
        }

    def _move(self, action: MovePod, live: LiveObject) -> LiveObject:
        """Evict the pod (PDB-respecting); re-create a bare pod on the planned node."""
        bare: dict[str, Any] | None = None
        if not live.fact("has_controller"):
            bare = self._call(action, self.core.read_namespaced_pod, action.pod, action.namespace)
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": action.pod, "namespace": action.namespace},
        }
        if live.uid:
            # Only the pod that was read: a newer pod of the same name (a StatefulSet's db-0
            # re-created) is refused with 409 Conflict ("Precondition failed: UID in precondition"),
            # and the actuator reads again.
            eviction["deleteOptions"] = {"preconditions": {"uid": live.uid}}
        copy_name = f"{action.pod[:240]}-moved"
        if bare is not None:
            # The copy first, then the eviction: if the copy cannot be made, nothing was evicted and
            # the move is retried; a bare pod is never left deleted with no copy.
            meta = bare.get("metadata") or {}
            spec = dict(bare.get("spec") or {})
            spec["nodeName"] = action.to_node
            copy = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": copy_name,
                    "namespace": action.namespace,
                    "labels": meta.get("labels") or {},
                    "annotations": {**(meta.get("annotations") or {}), "scaleahead.io/moved-from": action.from_node},
                },
                "spec": spec,
            }
            try:
                self._call(action, self.core.create_namespaced_pod, action.namespace, copy)
            except ActuationError as exc:
                if exc.outcome != "conflict":  # 409: the copy exists already (an earlier attempt)
                    raise
        try:
            self._call(action, self.core.create_namespaced_pod_eviction, action.pod, action.namespace, eviction)
        except ActuationError as exc:
            unclear = exc.status is None or exc.status >= 500  # no answer, or a server error
            evicted = self._evicted(action, live.uid) if exc.outcome == "failed" and unclear else False
            if evicted:
                # No answer, or a 5xx after the server had evicted it: the pod is gone or going,
                # so the move happened (its steer stays pending for the replacement).
                return LiveObject(live.target, live.field, 0, "", live.facts, live.owner)
            if bare is not None and evicted is None:
                # Not known whether the eviction landed (its answer and the read after it were both
                # lost): deleting the copy could leave the pod nowhere (a review of 2026-12-07
                # found it so). The copy stays; one of the two may run twice until someone looks.
                raise ActuationError(
                    "failed",
                    f"pod {action.namespace}/{action.pod}: the eviction got no clear answer "
                    f"({exc.message.removesuffix('; retried next cycle')}) and the "
                    f"pod could not be read again, so whether it was evicted is not known; its copy "
                    f"{action.namespace}/{copy_name} on {action.to_node} is kept so the pod is not lost: if "
                    f"{action.pod} still runs, delete one of the two (kubectl delete pod -n {action.namespace} "
                    f"{copy_name})",
                    exc.status,
                ) from exc
            if bare is not None:  # not evicted: take the copy back, so the pod does not run twice
                try:
                    self._call(action, self.core.delete_namespaced_pod, copy_name, action.namespace)
                except ActuationError as exc:
                    log.warning(
                        "could not delete the copy %s/%s after a failed eviction: %s", action.namespace, copy_name, exc
                    )
            raise
        return LiveObject(live.target, live.field, 0, "", live.facts, live.owner)

    def _evicted(self, action: MovePod, uid: str = "") -> bool | None:
        """After an eviction that got no clear answer: whether the pod is gone or terminating (the
        eviction landed). A pod of that name with another UID than ``uid`` (the one the eviction
        was for) is a new pod its controller made meanwhile: the evicted one is gone. None: not
        known (no answer again, or an error other than 404)."""
        try:
            pod = self._raw(self.core.read_namespaced_pod, action.pod, action.namespace)
        except ApiException as exc:
            return True if exc.status == 404 else None
        except (HTTPError, ActuationError):  # no answer, or one that is not JSON: unknown
            return None
        meta = pod.get("metadata") or {}
        if uid and meta.get("uid") and meta.get("uid") != uid:
            return True
        return bool(meta.get("deletionTimestamp"))


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def field_owner(obj: Mapping[str, Any], path: Sequence[str]) -> str:
    """The manager of the newest ``metadata.managedFields`` entry whose ``fieldsV1`` holds ``path``
    (``("f:spec", "f:replicas")``); ``""``: none does (or the entries are not what the API serves)."""
    best, best_time = "", ""
    entries = (obj.get("metadata") or {}).get("managedFields")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        node: Any = entry.get("fieldsV1")
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        manager, when = entry.get("manager"), str(entry.get("time") or "")
        if node is not None and isinstance(manager, str) and manager and (not best or when >= best_time):
            best, best_time = manager, when
    return best


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
