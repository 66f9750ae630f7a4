"""The actuator's target protocol: read the state a plan needs, apply one action, report how it went.

A ``Target`` is a Kubernetes cluster (``actuator.kubernetes``) or a simulated one
(``actuator.simulated``); the same ``apply_plan`` code path drives both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from scaleahead.types import Action, ClusterState, Plan, WorkloadRef

Outcome = Literal["applied", "skipped", "failed", "dry-run"]


@dataclass(frozen=True, slots=True)
class ActionResult:
    action: Action
    outcome: Outcome
    detail: str = ""


class Target(Protocol):
    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState: ...

    def apply(self, action: Action) -> ActionResult: ...


def apply_plan(plan: Plan, target: Target, dry_run: bool = False) -> list[ActionResult]:
    """Apply a plan's changes one by one; no-ops make no calls; one failure does not stop the rest."""
    results: list[ActionResult] = []
    for action in plan.actions:
        if action.is_noop:
            results.append(ActionResult(action, "skipped", "no change"))
        elif dry_run:
            results.append(ActionResult(action, "dry-run", "would apply"))
        else:
            try:
                results.append(target.apply(action))
            except Exception as exc:  # noqa: BLE001 - one failed action must not stop the plan
                results.append(ActionResult(action, "failed", f"{type(exc).__name__}: {exc}"))
    return results
