"""The safety check: one action against its policy and the LIVE object, just before it is applied.

Pure (no I/O, no clock): ``check(action, live, policy, plan_created_at, now, config)`` says
whether to apply, at which value, or why not. It re-applies the policy's bounds and step limits
relative to the *live* value (the plan may have been made from an older one), caps an HPA floor
at the HPA's maxReplicas, keeps a scale-up inside the namespace's pod quota, refuses a pod move a
PodDisruptionBudget does not allow, and refuses a plan older than ``max_plan_age_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from actuator.base import PDB_FACT, LiveObject
from scaleahead.policy import Policy
from scaleahead.types import Action, MovePod, ScaleTo, SetWarmPool


@dataclass(frozen=True, slots=True)
class SafetyConfig:
    """Process-wide actuation limits (``Settings.actuation`` plus the actuator's own)."""

    max_plan_age_s: float = 30.0
    paused: bool = False
    human_edit_hold_s: float = 3600.0
    max_conflict_retries: int = 3
    #: API writes of one plan in flight at once (``Actuator.apply_plan``; 1: one at a time). Applies
    #: only to a target that declares ``concurrent_io`` (``KubernetesTarget``).
    concurrent_writes: int = 1


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Literal["apply", "skip", "noop"]
    value: int
    reason: str
    notes: tuple[str, ...] = field(default_factory=tuple)


def desired_value(action: Action) -> int:
    if isinstance(action, ScaleTo):
        return action.to_replicas
    if isinstance(action, SetWarmPool):
        return action.to_instances
    return 0


def too_old(plan_created_at: float, now: float, config: SafetyConfig) -> str:
    """Why a plan made at ``plan_created_at`` may no longer be applied at ``now`` (older than
    ``max_plan_age_s``), else ``""``. The actuator asks before reading an action's object too: an
    action of a plan already too old costs no request."""
    age = now - plan_created_at
    if age > config.max_plan_age_s:
        limit = config.max_plan_age_s
        return f"the plan is {age:.0f} s old, older than maxPlanAge {limit:.0f} s; the next plan decides"
    return ""


def check(
    action: Action,
    live: LiveObject,
    policy: Policy | None,
    plan_created_at: float,
    now: float,
    config: SafetyConfig,
) -> Verdict:
    """Decide what may be done for ``action`` given the live object (see the module docstring)."""
    old = too_old(plan_created_at, now, config)
    if old:
        return Verdict("skip", live.value, old)
    if isinstance(action, MovePod):
        if not live.value:
            where = "on " + action.to_node if live.fact("on_to_node") else "elsewhere"
            if live.fact("terminating"):
                where = "terminating"
            if live.fact("recreated"):
                where = "re-created under its name since the plan; the planned pod is gone"
            return Verdict(
                "skip", 0, f"pod {action.namespace}/{action.pod} is no longer on {action.from_node} ({where})"
            )
        budgets = sorted(k[len(PDB_FACT) :] for k in (live.facts or {}) if k.startswith(PDB_FACT))
        if len(budgets) > 1:
            return Verdict(
                "skip",
                1,
                f"pod {action.namespace}/{action.pod} is covered by {len(budgets)} PodDisruptionBudgets "
                f"({', '.join(budgets)}): the Eviction API refuses to evict a pod more than one budget covers",
            )
        allowed = live.fact("pdb_disruptions_allowed")
        if allowed is not None and allowed < 1:
            return Verdict(
                "skip",
                1,
                f"a PodDisruptionBudget of pod {action.namespace}/{action.pod} allows no disruption now",
            )
        return Verdict("apply", 1, "")
    want = desired_value(action)
    notes: list[str] = []
    if policy is not None:
        spec = policy.spec
        if isinstance(action, SetWarmPool):
            lo, hi = 0, spec.warm_pool.max_instances
        else:
            lo, hi = spec.min_replicas, spec.max_replicas
        if want < lo or want > hi:
            clamped = min(hi, max(lo, want))
            notes.append(f"clamped {want} -> {clamped} to the policy's bounds [{lo}, {hi}]")
            want = clamped
        if isinstance(action, ScaleTo):
            up, down = spec.max_step_up, spec.max_step_down
            # The step limit from the live value, within the bounds: a live value outside them
            # (someone set 30 where maxReplicas is 20, or the bounds were just changed) goes into
            # them at once, as the planner plans it and the HPA does; until 2026-12-06 it moved
            # by one step a cycle, so the plan's "raised to minReplicas 10" wrote 2 (audit).
            raw = min(want, live.value + up) if want > live.value else max(want, live.value - down)
            if raw != want:
                sign = f"+{up}" if want > live.value else f"-{down}"
                stepped = min(hi, max(lo, raw))
                notes.append(
                    f"step limited to {sign} from the live {live.value}"
                    if stepped == raw
                    else f"the live {live.value} is outside the bounds: moved into them at once (to {stepped}), "
                    f"more than the step limit {sign}"
                )
                want = stepped
    hpa_max = live.fact("hpa_max")
    if hpa_max is not None and want > hpa_max:
        notes.append(f"capped at the HPA's maxReplicas {hpa_max}")
        want = hpa_max
    free = live.fact("quota_pods_free")
    # The pods that exist now, which the quota counts as used: the replicas asked for, or for an
    # HPA floor the HPA's currentReplicas, for a Knative Service's min-scale the pods its revisions
    # run (``pods_now``). A new value above them creates pods.
    pods = live.fact("pods_now")
    pods = live.value if pods is None else pods
    if free is not None and want > live.value and want > pods:
        unset = sorted(k.split(":", 2)[2] for k in (live.facts or {}) if k.startswith("quota_limited_by:unset:"))
        room = 0 if unset else max(free, 0)
        top = pods + room
        if want > top:
            if top <= live.value and unset:
                return Verdict(
                    "skip",
                    live.value,
                    f"the namespace's ResourceQuota on {' and '.join(unset)} refuses pods whose containers do not "
                    f"set it, and a container of {live.target}'s pod template sets none ({live.target} stays at "
                    f"{live.value}): set resources.{unset[0]} on every container, or a LimitRange default",
                )
            if top <= live.value:
                return Verdict(
                    "skip",
                    live.value,
                    f"the namespace's {_quota_name(live)} allows no more pods ({live.target} stays at {live.value})",
                )
            why = (
                f"ResourceQuota on {' and '.join(unset)} refuses its new pods (a container sets none)"
                if unset
                else f"{_quota_name(live)} ({room} more pods allowed)"
            )
            notes.append(f"limited by the namespace's {why}")
            want = top
    if isinstance(action, SetWarmPool) and action.restore_default:
        if live.fact("unset"):
            return Verdict("noop", want, f"{live.field} is already unset", tuple(notes))
        return Verdict("apply", want, "", tuple(notes))
    if want == live.value:
        return Verdict("noop", want, f"{live.field} is already {want}", tuple(notes))
    return Verdict("apply", want, "", tuple(notes))


def _quota_name(live: LiveObject) -> str:
    """Which quota binds: "pod quota", or "ResourceQuota on requests.cpu" (the keys that bind)."""
    keys = sorted(k.split(":", 1)[1] for k in (live.facts or {}) if k.startswith("quota_limited_by:"))
    resources = [k for k in keys if k not in ("pods", "count/pods")]
    return f"ResourceQuota on {' and '.join(resources)}" if resources else "pod quota"
