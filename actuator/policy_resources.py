"""PredictiveScalingPolicy custom resources: read the policies from the cluster, write their status.

In a cluster the policies are custom resources (``deploy/base/crd.yaml``, generated from the same
pydantic schema as the YAML files). ``ClusterPolicies`` lists them through the official client
(an invalid object is skipped and reported, never fatal for the others); ``PolicyStatusWriter``
patches their status subresource with the last decision (forecast peak, desired replicas, reason,
fallback mode), but only when something a person would notice changed, or at most once per
``refresh_s``, so a thousand policies do not mean a hundred writes a second.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from scaleahead.policy import API_VERSION, Policy

log = logging.getLogger("scaleahead.actuator.policies")

GROUP, VERSION = API_VERSION.split("/")
PLURAL = "predictivescalingpolicies"
#: Status fields whose change is worth a write at once; the rest refresh every ``refresh_s``.
_SALIENT = ("desiredReplicas", "currentReplicas", "fallbackMode", "lastReasonCode", "model")


class ClusterPolicies:
    """Lists PredictiveScalingPolicy objects (all namespaces, or one) as validated ``Policy``."""

    def __init__(self, api: Any, namespace: str | None = None) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.invalid: dict[str, str] = {}

    def load(self) -> list[Policy]:
        if self.namespace is None:
            raw = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        else:
            raw = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        doc: dict[str, Any] = raw if isinstance(raw, dict) else {}
        policies: list[Policy] = []
        self.invalid = {}
        seen: set[str] = set()
        for item in doc.get("items", []):
            meta = item.get("metadata", {})
            name = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
            obj: dict[str, Any] = {
                "apiVersion": item.get("apiVersion", API_VERSION),
                "kind": item.get("kind", "PredictiveScalingPolicy"),
                "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace", "default")},
                "spec": dict(item.get("spec") or {}),
            }
            target = obj["spec"].get("target")
            if isinstance(target, dict) and "namespace" not in target:
                obj["spec"]["target"] = {**target, "namespace": obj["metadata"]["namespace"]}
            try:
                policy = Policy.model_validate(obj)
            except ValidationError as exc:
                why = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                self.invalid[name] = why
                log.warning("policy %s is invalid and skipped: %s", name, why, extra={"event": "policy_invalid"})
                continue
            if policy.workload.key in seen:
                self.invalid[name] = f"another policy already targets {policy.workload.key}"
                log.warning("policy %s duplicates a target and is skipped", name, extra={"event": "policy_invalid"})
                continue
            seen.add(policy.workload.key)
            policies.append(policy)
        return policies


class StatusLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    def to_status(self) -> dict[str, Any]: ...


class PolicyStatusWriter:
    """Patches ``status`` of each policy object when it changed (or every ``refresh_s``)."""

    def __init__(self, api: Any, refresh_s: float = 60.0) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api)
        self.refresh_s = refresh_s
        self._last: dict[tuple[str, str], tuple[tuple[Any, ...], float]] = {}
        self.writes = 0

    def publish(self, statuses: Sequence[StatusLike], now: float | None = None) -> None:
        for st in statuses:
            status = st.to_status()
            t = now if now is not None else float(getattr(st, "updated_at", 0.0))
            key = (st.namespace, st.name)
            salient = tuple(status.get(k) for k in _SALIENT)
            last = self._last.get(key)
            if last is not None and last[0] == salient and t - last[1] < self.refresh_s:
                continue
            try:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, st.namespace, PLURAL, st.name, {"status": status}
                )
            except Exception as exc:  # noqa: BLE001 - one missing object must not stop the others
                log.warning("status of %s/%s not written: %s", st.namespace, st.name, exc)
                continue
            self.writes += 1
            self._last[key] = (salient, t)
