"""PredictiveScalingPolicy custom resources: read the policies from the cluster, write their status.

In a cluster the policies are custom resources (``deploy/base/crd.yaml``, generated from the same
pydantic schema as the YAML files). ``ClusterPolicies`` lists them through the official client
(an invalid object is skipped and reported, never fatal for the others); ``PolicyStatusWriter``
patches their status subresource with the last decision (forecast peak, desired replicas, reason,
fallback mode), but only when something a person would notice changed, or at most once per
``refresh_s``, so a thousand policies do not mean a hundred writes a second; and at most
``max_writes`` (100) per publish, a changed reason first, the rest in the next publishes, with the
refreshes spread over the cycles (docs/operations.md, "Policy status writes").

Every status carries an ``Accepted`` condition: ``True`` for a policy that is planned, ``False``
(with the reason: an invalid spec, a second policy for the same target, a target in another
namespace than the object's, one that would fight a HorizontalPodAutoscaler (``actuator.autoscalers``),
or one that the caller's check refuses) for a skipped one, so
``kubectl get pspol`` shows why a workload is not scaled.

A policy object scales workloads of its own namespace only: scaleahead's ClusterRole may scale
Deployments in every namespace, so a ``spec.target.namespace`` naming another one would let anyone
allowed to create policies in one namespace scale the workloads of all the others. Such an object is
refused (reason ``Refused``) unless the operator allows it (``cross_namespace``, the setting
``actuation.cross_namespace_targets``). Policy files (``--policies``) are the operator's and may
name any namespace.

Likewise what a policy says about its share of capacity is bounded by the operator (``PolicyLimits``,
from the ``actuation`` settings): its tenant is its own namespace (a ``spec.tenant`` naming another
is refused), its ``priority`` and ``weight`` at most the operator's bounds, and its tenant's
``minReplicas`` floors together at most the tenant's ``loop.capacity``. Policy files are not bounded.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from actuator.autoscalers import CONFLICT, AutoscalerCheck
from scaleahead.errors import UserError
from scaleahead.policy import API_VERSION, Policy, malformed

log = logging.getLogger("scaleahead.actuator.policies")

GROUP, VERSION = API_VERSION.split("/")
PLURAL = "predictivescalingpolicies"
#: Status fields whose change is worth a write at once; the rest refresh every ``refresh_s``.
_SALIENT = (
    "desiredReplicas",
    "currentReplicas",
    "desiredWarmInstances",
    "currentWarmInstances",
    "fallbackMode",
    "lastReasonCode",
    "model",
)
_CODE_AT = _SALIENT.index("lastReasonCode")
#: The rank of a refresh (nothing salient changed, written ``refresh_s`` ago): written last.
_REFRESH = 2
#: Its rank while an object's last status write failed: last.
_FAILING = 3
#: The condition every status carries: is the policy planned?
ACCEPTED = "Accepted"
#: Fields of a planned policy's status that a skipped one clears (a JSON merge patch removes a null).
_DECISION_FIELDS = (
    "desiredReplicas",
    "currentReplicas",
    "desiredWarmInstances",
    "currentWarmInstances",
    "forecastPeak",
    "fallbackMode",
    "model",
)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class PolicyLimits:
    """What a policy object read from the cluster may say about its share of capacity (the
    ``actuation`` settings of the same names; docs/operations.md, Security). The defaults are the
    settings' defaults."""

    #: The tenant is the object's namespace: ``spec.tenant`` unset (or ``default``) becomes it, and
    #: one naming another tenant is refused.
    tenant_from_namespace: bool = True
    #: A ``spec.priority`` above this is refused (None: no bound).
    max_priority: int | None = None
    #: A ``spec.weight`` above this is refused (None: no bound).
    max_weight: float | None = None
    #: A function's ``warmPool.memoryMbPerInstance`` below this is refused (None: no bound).
    min_memory_mb_per_instance: float | None = None
    #: ``loop.capacity``: a tenant's ``minReplicas`` floors together may not exceed its entry (nor
    #: ``*``); the objects planned before, then the oldest, keep theirs. Empty: no bound.
    capacity: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Any) -> PolicyLimits:
        """From a ``scaleahead.settings.Settings``."""
        act = settings.actuation
        return cls(
            tenant_from_namespace=act.tenant_from_namespace,
            max_priority=act.max_policy_priority,
            max_weight=act.max_policy_weight,
            min_memory_mb_per_instance=act.min_policy_memory_mb_per_instance,
            capacity=dict(settings.loop.capacity) if act.policy_floors_within_capacity else {},
        )


_HOW = "docs/operations.md, Security"


@dataclass(frozen=True, slots=True)
class Rejected:
    """A policy object that is not planned, and why (its status says so)."""

    name: str
    namespace: str
    reason: str  # condition reason, CamelCase: InvalidSpec, DuplicateTarget, Refused, ConflictingAutoscaler
    message: str
    updated_at: float = 0.0

    def to_status(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict.fromkeys(_DECISION_FIELDS)
        doc.update(
            lastReason=f"not planned: {self.message}",
            lastReasonCode="policy_rejected",
            lastUpdateTime=_stamp(self.updated_at),
        )
        return doc


class ClusterPolicies:
    """Lists PredictiveScalingPolicy objects (all namespaces, or one) as validated ``Policy``.

    ``check`` (optional) refuses a valid policy that this process cannot plan: it returns why, or
    None. Skipped objects are in ``invalid`` (name -> why) and ``rejected`` after each ``load``.
    An object whose ``spec.target.namespace`` is not its own namespace is refused unless
    ``cross_namespace`` (``actuation.cross_namespace_targets``); one that claims more than ``limits``
    allow (its tenant, priority, weight, memory per instance, floors) is refused too.
    """

    def __init__(
        self,
        api: Any,
        namespace: str | None = None,
        check: Callable[[Policy], str | None] | None = None,
        cross_namespace: bool = False,
        autoscalers: AutoscalerCheck | None = None,
        limits: PolicyLimits | None = None,
        on_load: Callable[[Mapping[str, int], bool | None], None] | None = None,
    ) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        #: Told after each load the objects skipped by reason, and whether the HPA list was read
        #: (``AutoscalerCheck.up``; None without the check): the daemon's metrics.
        self.on_load = on_load
        #: Objects skipped at the last load by reason (InvalidSpec, DuplicateTarget, Refused, ConflictingAutoscaler).
        self.rejected_reasons: dict[str, int] = {}
        self._rejected_now: dict[str, tuple[str, str]] = {}
        #: The skipped objects already logged, with their reason and why: logged again only once changed.
        self._warned: dict[str, tuple[str, str]] = {}
        self.check = check
        self.cross_namespace = cross_namespace
        self.autoscalers = autoscalers
        self.limits = limits if limits is not None else PolicyLimits()
        self.invalid: dict[str, str] = {}
        self.rejected: list[Rejected] = []
        #: Workload keys named by skipped objects (``Kind/namespace/name`` from their raw
        #: ``spec.target``): not planned, but not given up either (``Daemon`` does not release them).
        self.rejected_targets: set[str] = set()
        #: Workload (and floor HPA) key -> the object (``namespace/name``) planned for it at the last load.
        self._owners: dict[str, str] = {}

    def load(self) -> list[Policy]:
        """The valid policies; a list that fails (no CRD, RBAC, an unreachable API server) is a
        ``UserError`` that says which and what to do."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        where = "the cluster" if self.namespace is None else f"namespace {self.namespace}"
        try:
            if self.namespace is None:
                raw = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
            else:
                raw = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        except ApiException as exc:
            hint = {
                404: "Is the CRD installed (kubectl apply -f deploy/base/crd.yaml)?",
                403: "The service account may not list them: check the ClusterRole (deploy/base/rbac.yaml).",
                401: "The credentials were refused: check the kubeconfig or the service account token.",
            }.get(int(exc.status or 0), "Check the API server.") + " Or give the policies with --policies FILE|DIR."
            raise UserError(
                f"Cannot list the PredictiveScalingPolicy objects of {where}: HTTP {exc.status} {exc.reason}.", hint
            ) from exc
        except (HTTPError, OSError) as exc:
            raise UserError(
                f"Cannot list the PredictiveScalingPolicy objects of {where}: the API server did not answer "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}).",
                "Check the kubeconfig's server address and the network; or give the policies with --policies FILE|DIR.",
            ) from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("items", []), list):
            raise UserError(
                f"Cannot list the PredictiveScalingPolicy objects of {where}: the answer is not a list of objects "
                f"({type(raw).__name__}).",
                "Check the API server address (a proxy or load balancer may answer in its place).",
            )
        doc: dict[str, Any] = raw
        policies: list[Policy] = []
        self.invalid = {}
        self.rejected = []
        rejected_targets: set[str] = set()  # assigned whole at the end: another thread may read it
        rejected_now = self._rejected_now = {}  # object name -> (reason, why) at this load
        seen: dict[str, str] = {}  # workload key -> the object that targets it
        candidates: list[tuple[int, Policy, str, Callable[..., None], str]] = []  # valid, in list order
        for index, item in enumerate(doc.get("items", [])):
            # An object the API server's schema would refuse (a CRD older than this controller, or
            # none checking it) is skipped on its own: never a failure of the whole list.
            raw_meta = item.get("metadata") if isinstance(item, dict) else None
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
            own_name = meta.get("name") if isinstance(meta.get("name"), str) else None
            name = f"{namespace or ('default' if raw_meta is not None else '?')}/{own_name or '?'}"
            if not own_name:
                name += f" (item {index + 1} of the list)"  # unnamed: which one, and two never collide

            def reject(
                reason: str,
                why: str,
                hint: str,
                meta: dict[str, Any] = meta,
                name: str = name,
                item: Any = item,
                claims: bool = True,
                own_name: str | None = own_name,
                namespace: str | None = namespace,
            ) -> None:
                self.invalid[name] = why
                rejected_now[name] = (reason, why)
                spec = item.get("spec") if isinstance(item, dict) else None
                target = spec.get("target") if isinstance(spec, dict) else None
                # still a workload someone means to manage (not when the object may not manage it at all:
                # one in another namespace, unless cross_namespace)
                if claims and isinstance(target, dict) and target.get("name"):
                    kind = str(target.get("kind") or "Deployment")
                    own = str(meta.get("namespace", "default"))
                    ns = str(target.get("namespace") or own)
                    if self.cross_namespace or ns == own:
                        rejected_targets.add(f"{kind}/{ns}/{target['name']}")
                if own_name:
                    self.rejected.append(Rejected(own_name, namespace or "default", reason, f"{why}. {hint}"))

            shape = malformed(item)
            if shape is not None:
                reject(
                    "InvalidSpec",
                    f"malformed object: {shape}",
                    "Fix the object (kubectl edit); see docs/configuration.md.",
                )
                self._warn_rejected(
                    "policy %s is malformed and skipped: %s", name, shape, extra={"event": "policy_invalid"}
                )
                continue
            obj: dict[str, Any] = {
                "apiVersion": item.get("apiVersion", API_VERSION),
                "kind": item.get("kind", "PredictiveScalingPolicy"),
                "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace", "default")},
                "spec": dict(item["spec"]),
            }
            target = obj["spec"].get("target")
            if isinstance(target, dict) and "namespace" not in target:
                obj["spec"]["target"] = {**target, "namespace": obj["metadata"]["namespace"]}
            try:
                policy = Policy.model_validate(obj)
            except ValidationError as exc:
                why = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                reject(
                    "InvalidSpec", f"invalid spec: {why}", "Fix the object (kubectl edit); see docs/configuration.md."
                )
                self._warn_rejected(
                    "policy %s is invalid and skipped: %s", name, why, extra={"event": "policy_invalid"}
                )
                continue
            own = str(obj["metadata"]["namespace"])
            if not self.cross_namespace and policy.spec.target.namespace != own:
                # Checked before the duplicate rule: a refused object claims no target.
                reject(
                    "Refused",
                    f"spec.target.namespace {policy.spec.target.namespace!r} is not this policy's own namespace "
                    f"{own!r}: a PredictiveScalingPolicy scales workloads of its own namespace only (scaleahead "
                    "may scale workloads in every namespace, so a policy naming another one would let anyone who "
                    "can create policies here scale workloads there)",
                    f"Create the policy in namespace {policy.spec.target.namespace} (and drop target.namespace), or, "
                    "if policies of this namespace may scale workloads of others, have the operator set "
                    "SCALEAHEAD_ACTUATION__CROSS_NAMESPACE_TARGETS=true (docs/operations.md, Security).",
                    claims=False,
                )
                self._warn_rejected(
                    "policy %s targets namespace %s and is refused",
                    name,
                    policy.spec.target.namespace,
                    extra={"event": "policy_invalid"},
                )
                continue
            bounded = self._bounded(policy, own)
            if isinstance(bounded, tuple):
                why, hint = bounded
                reject("Refused", why, hint)
                self._warn_rejected("policy %s is refused: %s", name, why, extra={"event": "policy_invalid"})
                continue
            policy = bounded
            created = meta.get("creationTimestamp")
            candidates.append((index, policy, name, reject, created if isinstance(created, str) else "~"))
        # Which of several objects naming one workload (or, in mode floor, one HPA: each would overwrite
        # the other's minReplicas) is planned: the one planned at the last load, then the oldest, then
        # the first listed. Not the list order alone: a new object named "a-..." took over before.
        owners = self._owners

        def rank(c: tuple[int, Policy, str, Callable[..., None], str]) -> tuple[int, str, int]:
            index, policy, name, _, created = c
            return (0 if any(owners.get(k) == name for k in _claims(policy)) else 1, created, index)

        accepted: list[tuple[int, Policy]] = []
        floors = _Floors(self.limits.capacity)
        if self.autoscalers is not None:
            self.autoscalers.refresh([c[1] for c in candidates])
        for index, policy, name, reject, _ in sorted(candidates, key=rank):
            claims = _claims(policy)
            # First: a policy that would fight an HPA claims nothing (its workload is not handed back,
            # ``reject`` keeps it claimed), so it neither blocks the floor policy its message asks for
            # nor takes its tenant's floor budget (found by a review: both did).
            fight = self.autoscalers.conflict(policy) if self.autoscalers is not None else None
            if fight is not None:
                reject(CONFLICT, *fight)
                self._warn_rejected("policy %s is refused: %s", name, fight[0], extra={"event": "policy_invalid"})
                continue
            taken = next((k for k in claims if k in seen), None)
            if taken is not None:
                what = "already targets" if taken == claims[0] else "in mode floor already names"
                reject(
                    "DuplicateTarget",
                    f"another policy, {seen[taken]}, {what} {taken}",
                    "Keep one policy per workload (and per HPA): delete this one or point it at another target "
                    f"(the one planned before is kept, else the oldest: {seen[taken]} here).",
                )
                self._warn_rejected(
                    "policy %s is skipped: %s %s %s",
                    name,
                    seen[taken],
                    what,
                    taken,
                    extra={"event": "policy_invalid", "workload": claims[0], "kept": seen[taken]},
                )
                continue
            refused = self.check(policy) if self.check is not None else None
            if refused is not None:
                reject("Refused", refused, "Change the policy as said, or the process's history source.")
                self._warn_rejected("policy %s is refused: %s", name, refused, extra={"event": "policy_invalid"})
                continue
            over = floors.take(policy)
            if over is not None:
                reject("Refused", *over)
                self._warn_rejected("policy %s is refused: %s", name, over[0], extra={"event": "policy_invalid"})
                continue
            for k in claims:
                seen[k] = name
            accepted.append((index, policy))
        policies = [p for _, p in sorted(accepted, key=lambda a: a[0])]
        planned = {seen[p.workload.key] for p in policies}
        self._owners = {k: v for k, v in seen.items() if v in planned}
        self.rejected_targets = rejected_targets
        self._warned = rejected_now  # a refusal is logged again only once it went or changed
        counts: dict[str, int] = {}
        for reason, _ in rejected_now.values():
            counts[reason] = counts.get(reason, 0) + 1
        self.rejected_reasons = counts
        if self.on_load is not None:
            self.on_load(counts, self.autoscalers.up if self.autoscalers is not None else None)
        return policies

    def _warn_rejected(self, msg: str, name: str, *args: Any, extra: dict[str, Any]) -> None:
        """Log a skipped object's line (``policy_invalid``, with its ``policy`` and ``reason``) when it
        was not skipped at the last load, or for another reason or message: not at every reload."""
        reason, why = self._rejected_now[name]
        if self._warned.get(name) == (reason, why):
            return
        log.warning(msg, name, *args, extra={**extra, "policy": name, "reason": reason})

    def _bounded(self, policy: Policy, own: str) -> Policy | tuple[str, str]:
        """``policy`` with its tenant set to its namespace (``limits.tenant_from_namespace``), or
        why it is refused and what to do."""
        limits, spec = self.limits, policy.spec
        if limits.tenant_from_namespace and spec.tenant not in ("default", own):
            return (
                f"spec.tenant {spec.tenant!r} is not this policy's own namespace {own!r}: a policy's tenant is "
                "its namespace (a tenant named by the policy would let it escape its own limit in loop.capacity, "
                "or draw on another tenant's)",
                f"Drop spec.tenant (or set it to {own}); or, if the policies' authors may choose their tenants, "
                f"have the operator set SCALEAHEAD_ACTUATION__TENANT_FROM_NAMESPACE=false ({_HOW}).",
            )
        if limits.max_priority is not None and spec.priority > limits.max_priority:
            return (
                f"spec.priority {spec.priority} is above the operator's bound {limits.max_priority} "
                "(actuation.max_policy_priority): a higher priority is served first under shortage",
                f"Set spec.priority to at most {limits.max_priority}, or ask the operator to raise "
                f"SCALEAHEAD_ACTUATION__MAX_POLICY_PRIORITY ({_HOW}).",
            )
        if limits.max_weight is not None and spec.weight > limits.max_weight:
            return (
                f"spec.weight {spec.weight:g} is above the operator's bound {limits.max_weight:g} "
                "(actuation.max_policy_weight): the weight decides the share under shortage",
                f"Set spec.weight to at most {limits.max_weight:g}, or ask the operator to raise "
                f"SCALEAHEAD_ACTUATION__MAX_POLICY_WEIGHT ({_HOW}).",
            )
        least, warm = limits.min_memory_mb_per_instance, spec.warm_pool
        if (
            least is not None
            and spec.workload_class == "function"
            and warm.enabled
            and warm.memory_mb_per_instance < least
        ):
            return (
                f"spec.warmPool.memoryMbPerInstance {warm.memory_mb_per_instance:g} is below the operator's "
                f"bound {least:g} (actuation.min_policy_memory_mb_per_instance): the declared memory decides "
                "the function's share of loop.warm_memory_budget_mb",
                f"Declare the memory one instance really holds (at least {least:g} MB), or ask the operator to "
                f"lower SCALEAHEAD_ACTUATION__MIN_POLICY_MEMORY_MB_PER_INSTANCE ({_HOW}).",
            )
        if limits.tenant_from_namespace and spec.tenant != own:
            policy = policy.model_copy(update={"spec": spec.model_copy(update={"tenant": own})})
        return policy


class _Floors:
    """The ``minReplicas`` floors each tenant's accepted policies hold, against ``capacity``: the
    planner serves floors before any limit, so a floor above the tenant's limit would pass it."""

    def __init__(self, capacity: dict[str, int]) -> None:
        self.capacity = capacity
        self.held: dict[str, int] = {}
        #: Every tenant's floors together, against ``*`` (until 2026-12-06 each tenant's own were
        #: compared with ``*``, so several tenants' floors together could pass it).
        self.total = 0

    def take(self, policy: Policy) -> tuple[str, str] | None:
        """None (and the floor counted), or why the policy's floor does not fit and what to do."""
        tenant, floor = policy.spec.tenant, policy.spec.min_replicas
        held = self.held.get(tenant, 0)
        limits = [(f"tenant {tenant}'s", self.capacity[tenant], held, "its")] if tenant in self.capacity else []
        if "*" in self.capacity:
            limits.append(("the whole ('*')", self.capacity["*"], self.total, "all"))
        for which, cap, held, whose in limits:
            if held + floor > cap:
                others = f" with the {held} {whose} other policies hold" if held else ""
                return (
                    f"spec.minReplicas {floor}{others} is above {which} capacity {cap} (loop.capacity): floors are "
                    "served before any limit, so this one would pass it",
                    f"Lower minReplicas to at most {max(cap - held, 0)} (the policies planned before, then the oldest, "
                    "keep theirs), or ask the operator to raise loop.capacity, or to set "
                    f"SCALEAHEAD_ACTUATION__POLICY_FLOORS_WITHIN_CAPACITY=false ({_HOW}).",
                )
        if limits:
            self.held[tenant] = self.held.get(tenant, 0) + floor
            self.total += floor
        return None


def _claims(policy: Policy) -> list[str]:
    """The keys one policy object may hold alone: its workload, and in mode floor the HPA it writes."""
    target = policy.spec.target
    keys = [policy.workload.key]
    if target.mode == "floor" and target.kind != "KnativeService":
        keys.append(f"HorizontalPodAutoscaler/{target.namespace}/{target.hpa_name}")
    return keys


class StatusLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    def to_status(self) -> dict[str, Any]: ...


class PolicyStatusWriter:
    """Patches ``status`` of each policy object when it changed (or every ``refresh_s``).

    Each status gets the ``Accepted`` condition: ``True`` (reason ``Planned``) for a decision,
    ``False`` for a ``Rejected`` object, with the reason and message; its ``lastTransitionTime`` is
    when this writer first saw the current state (since the process started, at the earliest).
    """

    #: At most this many status writes (PATCH calls) per ``publish``, by default: the rest wait for
    #: the next one (docs/operations.md, "Policy status writes").
    MAX_WRITES = 100

    def __init__(
        self,
        api: Any,
        refresh_s: float = 60.0,
        on_write: Callable[[str], None] | None = None,
        max_writes: int = MAX_WRITES,
    ) -> None:
        from kubernetes import client

        if max_writes < 1:
            raise ValueError(f"max_writes must be at least 1, not {max_writes}")
        self.custom = client.CustomObjectsApi(api)
        self.refresh_s = refresh_s
        #: PATCH calls one ``publish`` makes at most: a new object or a changed reason first, then other
        #: changes, then refreshes, each the longest waiting first; the rest is written by later publishes.
        self.max_writes = max_writes
        #: Writes due but left for a later publish by the last ``publish`` (over ``max_writes``, or
        #: refreshes beyond their share).
        self.deferred = 0
        #: Refreshes may use this many writes now: it grows by (objects known) / ``refresh_s`` per
        #: second, at most one interval's worth, so the refreshes of N objects written in the same
        #: cycle are spread over the following ones instead of all falling due in one.
        self._refresh_tokens = 0.0
        self._tokens_at = -math.inf
        #: When each object's status was last tried (written or not): the longest waiting goes first.
        self._tried: dict[tuple[str, str], float] = {}
        #: Told each write's result: ``ok``, ``failed_4xx``, ``failed_5xx`` or ``failed_other`` (no
        #: answer): the daemon's counter ``scaleahead_status_writes_total{result}``.
        self.on_write = on_write
        self._last: dict[tuple[str, str], tuple[tuple[Any, ...], float]] = {}
        self._since: dict[tuple[str, str], tuple[bool, float]] = {}  # accepted?, since when
        #: When each policy object was last in a publish: one not seen for ``FORGET_AFTER_S`` (its
        #: policy deleted) is forgotten, so policy churn does not grow the two maps for ever.
        self._seen: dict[tuple[str, str], float] = {}
        #: Objects whose status write answered 404 (the object is gone), and when: not written
        #: while they keep being published; written again once published anew (``_published_anew``).
        self._gone: dict[tuple[str, str], float] = {}
        #: Why each object's last write failed (HTTP status, or the error's type): warned once per
        #: object and reason, and again only after a write of it succeeded in between.
        self._failed: dict[tuple[str, str], str] = {}
        self._swept = -math.inf
        self.writes = 0

    #: A policy object not in any publish for this long (s) is forgotten (found by the soak audit:
    #: 4,004 entries after 1,000 policies came and went, with 8 live).
    FORGET_AFTER_S = 3600.0

    def _sweep(self, t: float) -> None:
        if t - self._swept < self.refresh_s:
            return
        self._swept = t
        # ``publish`` runs on the loop's thread (the cycle's statuses) and on the job thread (a policy
        # reload's rejections): the sweep reads a copy (made in one step under the GIL), since the
        # other thread may add keys meanwhile; no lock is held across the PATCH calls (a reload
        # waited seconds behind a cycle's 2,000 writes).
        old = [key for key, seen in list(self._seen.items()) if t - seen > self.FORGET_AFTER_S]
        for key in old:
            self._seen.pop(key, None)
            self._last.pop(key, None)
            self._since.pop(key, None)
            self._gone.pop(key, None)
            self._failed.pop(key, None)
            self._tried.pop(key, None)

    def _published_anew(self, key: tuple[str, str], previous: float | None, t: float) -> bool:
        """Whether ``key``, whose write answered 404, is to be written again at ``t``: it was not
        published for longer than ``refresh_s`` before (its policy left the daemon's list at a reload
        and came back: a new object of that name), or its 404 is ``FORGET_AFTER_S`` old (an object
        deleted and re-created between two reloads was never left out: it is tried once an hour)."""
        gone = self._gone.get(key)
        if gone is None:
            return True
        if previous is None or t - previous > self.refresh_s or t - gone >= self.FORGET_AFTER_S:
            self._gone.pop(key, None)
            return True
        return False

    def _not_written(self, key: tuple[str, str], exc: Exception, t: float) -> None:
        """One line, once per object and reason (``status_failed``); a 404 marks the object gone."""
        from actuator.api_status import one_line, status_message

        status = getattr(exc, "status", None)
        said = status_message(exc)
        if status == 404:
            self._gone[key] = t
            self._last.pop(key, None)
            self._since.pop(key, None)
            why = "the object is gone (deleted, or its namespace deleted); not written again until it is published anew"
        elif status == 403:
            why = (
                "the API server refuses it: check what it says, and the ClusterRole's 'patch' on "
                "predictivescalingpolicies/status (deploy/base/rbac.yaml); tried again at the next publish"
            )
        else:
            why = "tried again at the next publish"
        reason = f"HTTP {status}" if isinstance(status, int) and status else type(exc).__name__
        if self._failed.get(key) == reason:
            return
        self._failed[key] = reason
        detail = f"{reason}: '{said}'" if said else (reason if status else f"{reason}: {one_line(str(exc))}")
        log.warning(
            "status of %s/%s not written (%s): %s",
            key[0],
            key[1],
            detail,
            why,
            extra={"event": "status_failed", "policy": f"{key[0]}/{key[1]}", "status": status},
        )

    def _condition(self, key: tuple[str, str], st: StatusLike, t: float) -> dict[str, str]:
        accepted = not isinstance(st, Rejected)
        state = self._since.get(key)
        if state is None or state[0] != accepted:
            state = (accepted, t)
            self._since[key] = state
        if isinstance(st, Rejected):
            reason, message = st.reason, st.message
        else:
            reason, message = "Planned", "scaleahead reads this policy and plans its workload every cycle."
        return {
            "type": ACCEPTED,
            "status": "True" if accepted else "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": _stamp(state[1]),
        }

    def publish(self, statuses: Sequence[StatusLike], now: float | None = None) -> None:
        """Writes the statuses that changed (or are due a refresh), at most ``max_writes`` of them:
        a new object or a changed reason (code, ``Accepted`` condition) first, then any other salient
        change, then refreshes (at most their share, ``_refresh_tokens``); within each, the object
        tried longest ago first. The rest is left for a later publish (``deferred``), which writes
        the status it is given then: only an object's newest status is ever written."""
        latest = -math.inf
        due: list[tuple[int, float, int, tuple[str, str], StatusLike, dict[str, Any], tuple[Any, ...], float]] = []
        for i, st in enumerate(statuses):
            status = st.to_status()
            t = now if now is not None else float(getattr(st, "updated_at", 0.0))
            key = (st.namespace, st.name)
            previous = self._seen.get(key)
            self._seen[key] = t
            latest = max(latest, t)
            if not self._published_anew(key, previous, t):
                continue  # its object answered 404 and it has been published ever since
            condition = self._condition(key, st, t)
            status["conditions"] = [condition]
            salient = (*(status.get(k) for k in _SALIENT), condition["status"], condition["message"])
            last = self._last.get(key)
            if last is None or _reason(last[0]) != _reason(salient):
                rank = 0  # never written by this process, or its reason or condition changed
            elif last[0] != salient:
                rank = 1
            elif t - last[1] < self.refresh_s:
                continue
            else:
                rank = _REFRESH
            if key in self._failed:
                # its last write failed: after every other write, so that 100 objects that keep failing
                # (422s, a CRD without status) cannot take the whole budget every publish and starve
                # the others' changes for good (found by a review)
                rank = _FAILING
            due.append((rank, self._tried.get(key, -math.inf), i, key, st, status, salient, t))
        if latest > -math.inf:
            self._add_refresh_tokens(latest)
        due.sort(key=lambda d: d[:3])
        budget = self.max_writes
        deferred = 0
        for rank, _, _, key, st, status, salient, t in due:
            if budget <= 0 or (rank == _REFRESH and self._refresh_tokens < 1.0):
                deferred += 1
                continue
            budget -= 1
            if rank == _REFRESH:
                self._refresh_tokens -= 1.0
            self._tried[key] = t
            try:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, st.namespace, PLURAL, st.name, {"status": status}
                )
            except Exception as exc:  # noqa: BLE001 - one missing object must not stop the others
                if self.on_write is not None:
                    self.on_write(_failure_class(exc))
                self._not_written(key, exc, t)
                continue
            if self.on_write is not None:
                self.on_write("ok")
            self._failed.pop(key, None)
            self.writes += 1
            self._last[key] = (salient, t)
        self.deferred = deferred
        if deferred:
            log.debug(
                "%d policy status writes left for the next publish (at most %d per publish)",
                deferred,
                self.max_writes,
                extra={"event": "status_deferred"},
            )
        if latest > -math.inf:
            self._sweep(latest)

    def _add_refresh_tokens(self, t: float) -> None:
        """Refreshes earned since the last publish: the objects known over ``refresh_s``, per second."""
        if self.refresh_s <= 0:
            self._refresh_tokens = float(self.max_writes)
        elif t > self._tokens_at:
            if self._tokens_at > -math.inf:
                earned = len(self._last) * (t - self._tokens_at) / self.refresh_s
                # not banked beyond this interval's share (a fraction of one write carries over): the
                # refreshes of objects written together are spread over the next publishes
                self._refresh_tokens = min(self._refresh_tokens + earned, max(1.0, earned))
            self._tokens_at = t

    def publish_rejected(self, rejected: Sequence[Rejected], now: float) -> None:
        """The status of each skipped object (``Accepted`` False), written at ``now``."""
        self.publish([replace(r, updated_at=now) for r in rejected], now=now)


def _reason(salient: tuple[Any, ...]) -> tuple[Any, ...]:
    """The reason in a status's salient fields (``lastReasonCode``, the condition's status and
    message): its change is written before other changes."""
    return salient[_CODE_AT], salient[-2], salient[-1]


def _failure_class(exc: Exception) -> str:
    """``failed_4xx`` or ``failed_5xx`` by the answer's HTTP status; ``failed_other`` without one."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and 400 <= status < 600:
        return f"failed_{status // 100}xx"
    return "failed_other"


def publishing_rejections(
    policies: ClusterPolicies, writer: PolicyStatusWriter, now: Callable[[], float]
) -> Callable[[], list[Policy]]:
    """``policies.load`` that also writes each skipped object's status (``Accepted`` False) at ``now()``."""

    def load() -> list[Policy]:
        out = policies.load()
        writer.publish_rejected(policies.rejected, now())
        return out

    return load
