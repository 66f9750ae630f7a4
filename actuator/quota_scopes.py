"""Which pods a ResourceQuota counts: its ``scopes`` and ``scopeSelector``, against a pod template.

A quota with scopes limits only the pods that match all of them (Kubernetes documentation,
"Resource Quotas", "Quota Scopes"). A common one forbids best-effort pods (``pods: "0"`` with scope
``BestEffort``): counted against every pod it would stop every scale-up, although it never
applies to a pod that asks for CPU or memory. Pure: no I/O.

Matched from the pod template (what the workload's next pod will look like):

- ``Terminating`` / ``NotTerminating``: ``spec.activeDeadlineSeconds`` set / not set;
- ``BestEffort`` / ``NotBestEffort``: no container (nor init container, nor the pod's pod-level
  ``spec.resources``) requests or limits CPU or memory / some does;
- ``PriorityClass``: ``spec.priorityClassName`` (operators ``In``, ``NotIn``, ``Exists``,
  ``DoesNotExist``); a pod without one matches as the empty name, though a cluster's
  ``globalDefault`` PriorityClass would give it that class's name at admission;
- ``CrossNamespacePodAffinity``: a pod (anti-)affinity term with ``namespaces`` or a
  ``namespaceSelector``;
- any other scope (e.g. ``VolumeAttributesClass``, which selects volume claims) matches no pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any


def quota_applies(quota: Mapping[str, Any], template: Mapping[str, Any]) -> bool:
    """Whether ``quota`` (a ResourceQuota object) counts the pods of ``template`` (a pod template)."""
    spec = quota.get("spec") or {}
    terms: list[tuple[str, str, Sequence[str]]] = [(str(s), "Exists", ()) for s in spec.get("scopes") or []]
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        terms.append((str(expr.get("scopeName", "")), str(expr.get("operator", "")), expr.get("values") or ()))
    return all(_matches(name, op, values, template.get("spec") or {}) for name, op, values in terms)


def _matches(scope: str, op: str, values: Sequence[str], pod: Mapping[str, Any]) -> bool:
    if scope == "PriorityClass":
        name = str(pod.get("priorityClassName") or "")
        if op == "In":
            return name in values
        if op == "NotIn":
            return name not in values
        if op == "DoesNotExist":
            return not name
        return bool(name)  # Exists
    if scope in ("Terminating", "NotTerminating"):
        hit = pod.get("activeDeadlineSeconds") is not None
    elif scope in ("BestEffort", "NotBestEffort"):
        hit = _best_effort(pod)
    elif scope == "CrossNamespacePodAffinity":
        hit = _cross_namespace_affinity(pod)
    else:
        return False
    if scope.startswith("Not"):
        hit = not hit
    return not hit if op == "DoesNotExist" else hit


def _best_effort(pod: Mapping[str, Any]) -> bool:
    """Kubernetes' QoS rule: no container asks for (or is limited to) more than zero CPU or memory,
    nor does the pod itself (pod-level ``spec.resources``, which decides the QoS class where set)."""
    for c in [{"resources": pod.get("resources")}, *(pod.get("containers") or []), *(pod.get("initContainers") or [])]:
        r = c.get("resources") or {}
        for kind in ("requests", "limits"):
            if any(_above_zero((r.get(kind) or {}).get(res)) for res in ("cpu", "memory")):
                return False
    return True


def _above_zero(quantity: Any) -> bool:
    """Whether a resource quantity ("0", "0m", "250m", "1Gi", 0.5) is more than zero; one that does
    not start with a number counts as more (the API server would have refused it)."""
    if quantity is None or quantity == "":
        return False
    match = re.match(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)", str(quantity))
    return match is None or float(match.group(1)) > 0


def _cross_namespace_affinity(pod: Mapping[str, Any]) -> bool:
    affinity = pod.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        preferred = rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        terms += [t.get("podAffinityTerm") or {} for t in preferred]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False
