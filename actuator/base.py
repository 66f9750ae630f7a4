"""The actuator's target protocol: read the state a plan needs, apply one action, report how it went.

A ``Target`` is a Kubernetes cluster (``actuator.kubernetes``) or a simulated one
(``actuator.simulated``); the same ``apply_plan`` code path drives both.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Literal, Protocol

from scaleahead.types import Action, ClusterState, Plan, WorkloadRef

Outcome = Literal["applied", "skipped", "failed", "dry-run"]

#: Why an action was not applied, where the policy status tells it apart (``lastReasonCode``):
#: ``noop`` (the field already holds the value: nothing to apply), ``paused`` (the kill switch, or
#: ``actuation.paused``), ``backing_off`` (the workload sits out after errors), ``human_edit`` (someone
#: else set the field: their value is respected for a while), ``co_writer`` (the same writer, named by
#: the object's managedFields, keeps undoing scaleahead's writes), ``not_leader`` (the Lease was lost).
#: Other skips (a safety check, a refused write) have no cause: their ``detail`` says why.
#: ``gone``: a pod move whose pod is no longer on its node (deleted, moved, re-created under its
#: name): nothing to evict, and its drain may still free the node.
Cause = Literal["", "noop", "paused", "backing_off", "human_edit", "co_writer", "not_leader", "gone"]


@dataclass(frozen=True, slots=True)
class ActionResult:
    """How one action went: ``outcome`` and a sentence (``detail``); ``cause`` says, machine-readably,
    why an action was not applied where a policy's status must tell it apart (``Cause``), else ``""``."""

    action: Action
    outcome: Outcome
    detail: str = ""
    cause: Cause = ""
    #: The value the safety layer let through for a replica count or warm pool (``safety.check``):
    #: written (``applied``), to be written (``dry-run``), or already held (a ``noop``). It differs
    #: from what the action asked when a limit from the live object or the cluster cut it (a step
    #: limit from the live value, the HPA's ``maxReplicas`` in floor mode, a quota); None when no
    #: check decided (a failure, a skip before the check, a pod move, a simulated target).
    written: int | None = None
    #: A failure the API server answered with a wait (a throttling 429's ``Retry-After``, s): the
    #: daemon's back-off for the workload lasts at least this long (``scaleahead.daemon.Backoff``).
    retry_after_s: float | None = None


class Target(Protocol):
    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState: ...

    def apply(self, action: Action) -> ActionResult: ...


def apply_plan(plan: Plan, target: Target, dry_run: bool = False) -> list[ActionResult]:
    """Apply a plan's changes one by one; no-ops make no calls; one failure does not stop the rest."""
    results: list[ActionResult] = []
    scope = getattr(target, "plan_reads", None)  # quotas read once a plan (``KubernetesTarget.plan_reads``)
    with scope() if scope is not None else nullcontext():
        for action in plan.actions:
            if action.is_noop:
                results.append(ActionResult(action, "skipped", "no change", "noop"))
            elif dry_run:
                results.append(ActionResult(action, "dry-run", "would apply"))
            else:
                try:
                    results.append(target.apply(action))
                except Exception as exc:  # noqa: BLE001 - one failed action must not stop the plan
                    results.append(ActionResult(action, "failed", f"{type(exc).__name__}: {exc}"))
    return results


@dataclass(frozen=True, slots=True)
class LiveObject:
    """The live value of the field an action manages, read just before acting.

    ``value`` is the managed field's value (replicas, minReplicas, min-scale; for a pod move, 1
    if the pod still runs on its ``from`` node); ``resource_version`` is the object's version for
    optimistic concurrency; ``facts`` carries what the safety layer checks (HPA maxReplicas, free
    pod quota, PDB disruptions allowed); ``owner`` is a pod's controller ``(kind, name)``, if any;
    ``uid`` is the object's ``metadata.uid``: which pod of that name was read (a StatefulSet
    re-creates ``db-0`` under the same name, with a new UID), or which Deployment, HPA or Knative
    Service (one deleted and created again under its name is a new object, not an edited one).
    """

    target: str
    field: str
    value: int
    resource_version: str
    facts: dict[str, int] | None = None
    owner: tuple[str, str] | None = None
    uid: str = ""

    def fact(self, name: str) -> int | None:
        return None if self.facts is None else self.facts.get(name)


#: A pod move's live facts name each PodDisruptionBudget that covers the pod: ``PDB_FACT + name``
#: is that budget's ``status.disruptionsAllowed`` (``pdb_disruptions_allowed`` is the least of them).
PDB_FACT = "pdb:"

#: The field manager scaleahead's writes carry (``fieldManager``): its own entries in an object's
#: ``metadata.managedFields``, never taken for another writer's.
FIELD_MANAGER = "scaleahead"


class ActuationError(Exception):
    """An action that cannot be applied; ``outcome`` says whether to skip it or count it as failed.

    ``skipped``: the object or permission is wrong and retrying will not help until someone fixes
    it (the message names the object and the fix). ``failed``: transient (5xx, timeout); the next
    cycle tries again. ``conflict``: the object changed under us (409): read again and re-check.
    """

    def __init__(
        self,
        outcome: Literal["skipped", "failed", "conflict"],
        message: str,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        #: The API server's HTTP status, when it answered (404: the object does not exist).
        self.status = status
        #: How long the API server asked to wait (a throttling 429's ``Retry-After``), else None.
        self.retry_after_s = retry_after_s


class LiveTarget(Target, Protocol):
    """A target that can read the live managed field and write it with a version precondition."""

    def live(self, action: Action, quota_room: bool = True) -> LiveObject: ...

    def write(self, action: Action, value: int, live: LiveObject) -> LiveObject: ...
