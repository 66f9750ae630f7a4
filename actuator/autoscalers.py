"""Other autoscalers on scaleahead's targets: a policy that would fight a HorizontalPodAutoscaler.

In mode ``direct`` scaleahead writes a Deployment's or StatefulSet's ``spec.replicas``. An HPA
that scales the same workload writes it too, every 15 s: each undoes the other's write, and
scaleahead took the HPA's writes for a person's (``kubectl scale``) and left the workload alone for
``actuation.human_edit_hold_s``, then wrote again. ``AutoscalerCheck`` reads the HPAs once per
policy load and says which policy would do that, so it is refused with a reason that says what to
do (mode ``floor`` with that HPA, or delete it) instead. It also refuses a policy in mode ``floor``
whose ``hpaName`` names an HPA that scales another workload (raising that HPA's minReplicas would
scale the wrong one), or one that another controller manages (a controller ownerReference, such as
KEDA's ScaledObject: it sets the HPA's minReplicas back).

An HPA list that fails (no RBAC ``list`` on horizontalpodautoscalers, an error) is logged once
per failing streak and the last answer read stays in force (none read yet: no policy is refused),
so a passing API error does not accept a refused policy for one load and refuse it again the next.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from scaleahead.errors import UserError
from scaleahead.policy import Policy

log = logging.getLogger("scaleahead.actuator.autoscalers")

#: The condition reason of a policy refused by this check.
CONFLICT = "ConflictingAutoscaler"
_SCALED = ("Deployment", "StatefulSet")


class AutoscalerCheck:
    """HorizontalPodAutoscalers by the workload they scale, and the policies that would fight one.

    ``cluster_wide`` reads every namespace's HPAs in one list (the daemon watching every namespace's
    policies); otherwise the namespaces of the policies' targets, one list each.
    """

    def __init__(self, api: Any, cluster_wide: bool = False, timeout_s: float = 10.0) -> None:
        from kubernetes import client

        self.autoscaling = client.AutoscalingV2Api(api)
        self.cluster_wide = cluster_wide
        self.timeout_s = timeout_s
        #: (namespace, HPA name) -> the key (``Kind/namespace/name``) of the workload it scales.
        self.targets: dict[tuple[str, str], str] = {}
        #: (namespace, HPA name) -> its controller (``Kind name`` of a controller ownerReference, such
        #: as KEDA's ``ScaledObject web``), which sets the HPA's spec back when anyone else changes it.
        self.controllers: dict[tuple[str, str], str] = {}
        #: workload key -> the names of the HPAs that scale it (built from ``targets`` once per refresh:
        #: scanning every HPA for every policy took 5.6 s per load at 10,000 of each, a scale audit).
        self._by_target: dict[str, list[str]] = {}
        self._read: set[str | None] = set()  # the scopes read at least once (None: every namespace)
        self._failing: set[str | None] = set()  # the scopes whose last list failed (warned once per streak)

    def refresh(self, policies: list[Policy]) -> None:
        """Read the HPAs the policies' targets could have (see the class); never raises."""
        scopes: list[str | None] = [None]
        if not self.cluster_wide:
            scopes = [*sorted({p.spec.target.namespace for p in policies if p.spec.target.kind in _SCALED})]
        # A namespace no policy targets any more is not listed again: forget it, else its last
        # failure kept ``up`` at 0 (and its alert firing) for good (found by a review).
        self._failing &= set(scopes)
        self._read &= set(scopes)
        for key in [k for k in self.targets if None not in scopes and k[0] not in scopes]:
            del self.targets[key]
            self.controllers.pop(key, None)
        for scope in scopes:
            try:
                items = self._list(scope)
            except Exception as exc:  # noqa: BLE001 - any failure keeps the last answer (see the module)
                if scope not in self._failing:
                    where = "every namespace" if scope is None else f"namespace {scope}"
                    log.warning(
                        "cannot list the HorizontalPodAutoscalers of %s (%s); policies that would fight an HPA "
                        "are judged on the last list read%s. Let scaleahead's ClusterRole list "
                        "horizontalpodautoscalers (deploy/base/rbac.yaml) and check the API server.",
                        where,
                        _why(exc),
                        "" if scope in self._read else " (none yet: none is refused)",
                        extra={"event": "autoscaler_check_failed"},
                    )
                self._failing.add(scope)
                continue
            self._failing.discard(scope)
            self._read.add(scope)
            for key in [k for k in self.targets if scope is None or k[0] == scope]:
                del self.targets[key]
                self.controllers.pop(key, None)
            for item in items:
                meta = item.get("metadata") if isinstance(item, dict) else None
                spec = item.get("spec") if isinstance(item, dict) else None
                ref = spec.get("scaleTargetRef") if isinstance(spec, dict) else None
                if not (isinstance(meta, dict) and isinstance(ref, dict)):
                    continue
                ns, name = meta.get("namespace"), meta.get("name")
                kind, target = ref.get("kind"), ref.get("name")
                if all(isinstance(v, str) and v for v in (ns, name, kind, target)):
                    self.targets[(str(ns), str(name))] = f"{kind}/{ns}/{target}"
                    owners = meta.get("ownerReferences")
                    for o in owners if isinstance(owners, list) else []:
                        if isinstance(o, dict) and o.get("controller") is True:
                            self.controllers[(str(ns), str(name))] = f"{o.get('kind', '?')} {o.get('name', '?')}"

        by_target: dict[str, list[str]] = {}
        for (_, name), scaled in self.targets.items():
            by_target.setdefault(scaled, []).append(name)
        self._by_target = {k: sorted(v) for k, v in by_target.items()}

    @property
    def up(self) -> bool:
        """Whether the last list of every scope read answered (``scaleahead_autoscaler_check_up``)."""
        return not self._failing

    def _list(self, scope: str | None) -> list[Any]:
        opts: dict[str, Any] = {"_preload_content": False, "_request_timeout": self.timeout_s}
        if scope is None:
            resp: Any = self.autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces(**opts)
        else:
            resp = self.autoscaling.list_namespaced_horizontal_pod_autoscaler(scope, **opts)
        doc = json.loads(resp.data or b"{}")
        items = doc.get("items") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ValueError(f"the answer is not a list of objects ({type(doc).__name__})")
        return items

    def conflict(self, policy: Policy) -> tuple[str, str] | None:
        """(why, what to do) if ``policy`` would fight an HPA (see the module), else None."""
        target = policy.spec.target
        if target.kind not in _SCALED:
            return None
        key = policy.workload.key
        if target.mode == "direct":
            hpas = self._by_target.get(key, [])
            if not hpas:
                return None
            named = ", ".join(f"HorizontalPodAutoscaler {target.namespace}/{h}" for h in hpas)
            why = f"{named} also scales {key}: in mode direct each would undo the other's writes to spec.replicas"
            own = [h for h in hpas if (target.namespace, h) not in self.controllers]
            if not own:  # every one is another controller's (KEDA's): a floor on it would be undone too
                by = self.controllers[(target.namespace, hpas[0])]
                return (
                    f"{why}; {hpas[0]} is managed by {by}, which sets its minReplicas back",
                    f"Leave {key} to {by} (delete this policy), or replace {by} by an HPA of your own and set "
                    "spec.target.mode: floor with its name (docs/actuator.md, Other autoscalers).",
                )
            return (
                why,
                f"Set spec.target.mode: floor and spec.target.hpaName: {own[0]} (scaleahead then raises the HPA's "
                "minReplicas ahead of demand and the HPA keeps scaling above it), or delete the HPA "
                "(docs/actuator.md, Other autoscalers).",
            )
        scaled = self.targets.get((target.namespace, str(target.hpa_name)))
        if scaled is None:
            return None  # an HPA not (yet) there is the actuator's to report, per action
        ctl = self.controllers.get((target.namespace, str(target.hpa_name)))
        if scaled == key and ctl is not None:
            return (
                f"spec.target.hpaName {target.hpa_name} is managed by {ctl}, which sets the HPA's minReplicas back: "
                "a floor written there would be undone at its next reconcile",
                f"Leave {key} to {ctl} (delete this policy), or replace {ctl} by an HPA of your own "
                "(docs/actuator.md, Other autoscalers).",
            )
        if scaled == key:
            return None
        own = self._by_target.get(key, [])
        return (
            f"spec.target.hpaName {target.hpa_name} names the HorizontalPodAutoscaler of {scaled}, not of {key}: "
            "raising its minReplicas would scale the other workload",
            (f"Set spec.target.hpaName: {own[0]} (it scales {key})" if own else f"Name the HPA that scales {key}")
            + " (docs/actuator.md, Other autoscalers).",
        )


def _why(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status:
        return f"HTTP {status} {getattr(exc, 'reason', '') or ''}".strip()
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def hpa_fights(api: Any, policies: list[Policy]) -> list[tuple[Policy, tuple[str, str]]]:
    """Each of ``policies`` that would fight an HPA, with (why, what to do), from one read of the
    HPAs (``AutoscalerCheck``; none when they cannot be listed: the check warns)."""
    check = AutoscalerCheck(api)
    check.refresh(policies)
    return [(p, found) for p in policies if (found := check.conflict(p)) is not None]


def refuse_hpa_fights(api: Any, policies: list[Policy]) -> None:
    """``scaleahead plan --apply``: a ``UserError`` naming every policy that would fight an HPA
    (``AutoscalerCheck.conflict``), with what to do, before anything is written; nothing when the
    HPAs cannot be listed (the check warns, as in ``run``). Until 2026-12-06 ``plan --apply`` wrote
    ``spec.replicas`` under an HPA, which undid it within seconds."""
    fights = hpa_fights(api, policies)
    if fights:
        raise UserError(
            "; ".join(f"policy {p.metadata.namespace}/{p.metadata.name}: {why}" for p, (why, _) in fights)
            + ". Nothing was applied.",
            fights[0][1][1],
        )
