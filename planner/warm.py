"""Warm pools for serverless functions: pre-warm before a likely call, keep warm while one is likely.

A cold start costs latency; a warm instance that nobody calls costs memory. From the forecast
probability of an invocation in each coming step (``InvocationForecast``), a function gets a warm
instance for the next step when that probability is at least ``warmPool.minProbability``. The
same forecast says for how long to keep it warm (the run of coming steps whose probability stays
at or above the threshold, capped by ``warmPool.keepAliveSeconds``) and, when the function is not
worth keeping warm now, when to pre-warm it (the first coming step above the threshold).

Memory is bounded twice: per function by ``warmPool.memoryBudgetMb`` (and ``maxInstances``), and
across functions by an optional total budget, which keeps the instances with the highest
probability per MB and says in each dropped action's reason that the budget dropped it.

Pure: no I/O, no clock (docs/planner.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from scaleahead.policy import FallbackMode, PolicySpec
from scaleahead.types import InvocationForecast, Reason, SetWarmPool, WorkloadRef, WorkloadState


@dataclass(frozen=True, slots=True)
class WarmDecision:
    """One function's warm-pool decision, with what the total memory budget needs to know."""

    action: SetWarmPool
    fallback: str | None
    probability: float
    memory_mb: float


def _pct(p: float) -> str:
    return f"{p * 100:.1f} %" if p < 0.1 else f"{p * 100:.0f} %"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def instance_cap(spec: PolicySpec) -> int:
    """Most warm instances the policy allows (``maxInstances`` and the per-function memory budget)."""
    pool = spec.warm_pool
    cap = pool.max_instances
    if pool.memory_budget_mb is not None:
        cap = min(cap, int(math.floor(pool.memory_budget_mb / pool.memory_mb_per_instance + 1e-9)))
    return max(cap, 0)


def decide_warm_pool(
    workload: WorkloadRef,
    spec: PolicySpec,
    state: WorkloadState,
    forecast: InvocationForecast | None,
    now: float,
) -> WarmDecision:
    """Decide one function's warm pool for the coming step. Pure."""
    pool = spec.warm_pool
    current = state.warm_instances
    cap = instance_cap(spec)
    threshold = pool.min_probability
    mem = pool.memory_mb_per_instance
    fallback: str | None = None
    stale = forecast is not None and now - forecast.origin > spec.fallback.stale_after_seconds
    too_short = forecast is not None and forecast.origin + forecast.horizon_s <= now
    if forecast is None or stale or too_short:
        why = "no invocation forecast" if forecast is None else ("stale forecast" if stale else "forecast too short")
        fallback = spec.fallback.mode.value
        observed = state.observed_demand
        if spec.fallback.mode == FallbackMode.REACTIVE:
            recent = (
                math.isfinite(observed)
                and observed > 0
                and math.isfinite(state.observed_at)
                and now - state.observed_at <= pool.keep_alive_seconds
            )
            want = min(1, cap) if recent else 0
            text = (
                f"{why}: fallback reactive, invoked {observed:g} times at the last observation, "
                f"keep warm up to {_minutes(pool.keep_alive_seconds)} after it"
                if recent
                else f"{why}: fallback reactive, no recent invocation observed"
            )
        elif spec.fallback.mode == FallbackMode.STATIC:
            want = min(int(spec.fallback.static_replicas or 0), cap)
            text = f"{why}: fallback static {want} warm instances"
        else:
            want = min(current, cap)
            text = f"{why}: fallback keeps the current {current} warm instances"
        keep = pool.keep_alive_seconds if want > 0 else 0.0
        details: dict[str, float | int | str] = {"fallback": fallback, "cause": why}
        code = f"fallback_{fallback}"
        p_now = float("nan")
    else:
        k0 = min(max(int(math.floor((now - forecast.origin) / forecast.step_s + 1e-9)), 0), forecast.horizon_steps - 1)
        probs = forecast.probability[k0:]
        p_now = float(probs[0])
        idle = "never invoked before" if not math.isfinite(forecast.idle_s) else f"idle {_minutes(forecast.idle_s)}"
        if p_now >= threshold and cap > 0:
            want = min(cap, max(1, current))
            below = np.flatnonzero(probs < threshold)
            run = int(below[0]) if below.size else len(probs)
            keep = min(run * forecast.step_s, pool.keep_alive_seconds)
            code = "warm_forecast"
            text = (
                f"P(invocation) {_pct(p_now)} in the next {_minutes(forecast.step_s)} ({idle}) is at least "
                f"{_pct(threshold)}: keep warm for {_minutes(keep)} while the forecast stays above it"
            )
        else:
            want = 0
            keep = 0.0
            later = np.flatnonzero(probs[1:] >= threshold)
            if cap == 0:
                code, text = "warm_no_budget", "the memory budget allows no warm instance"
            elif later.size:
                k = int(later[0]) + 1
                code = "prewarm_later"
                text = (
                    f"P(invocation) {_pct(p_now)} now ({idle}) is below {_pct(threshold)}; "
                    f"pre-warm in {_minutes(k * forecast.step_s)}, when it reaches {_pct(float(probs[k]))}"
                )
            else:
                code = "cold_ok"
                text = (
                    f"P(invocation) {_pct(p_now)} now ({idle}) and at most {_pct(float(probs.max()))} over the next "
                    f"{_minutes(len(probs) * forecast.step_s)}, below {_pct(threshold)}: not worth "
                    f"{mem:g} MB warm"
                )
        details = {"probability": p_now, "threshold": threshold, "idle_s": forecast.idle_s, "memory_mb": mem}
    verb = "warm" if want > current else ("cool" if want < current else "hold")
    sentence = (
        f"hold {workload} at {current} warm: {text}"
        if verb == "hold"
        else f"{verb} {workload} {current} -> {want}: {text}"
    )
    action = SetWarmPool(workload, current, want, keep, Reason(code, sentence, details))
    return WarmDecision(action, fallback, p_now, want * mem)


def fit_memory_budget(decisions: Sequence[WarmDecision], budget_mb: float) -> tuple[list[WarmDecision], list[str]]:
    """Keep total warm memory within ``budget_mb``: drop the instances least likely to be called per MB.

    Returns the decisions (in the same order, dropped ones cut to 0 warm instances with the reason
    extended) and notes for the plan.
    """
    total = sum(d.memory_mb for d in decisions)
    if total <= budget_mb + 1e-9:
        return list(decisions), []
    order = sorted(
        (i for i, d in enumerate(decisions) if d.memory_mb > 0),
        key=lambda i: (
            -(decisions[i].probability if math.isfinite(decisions[i].probability) else 1.0) / decisions[i].memory_mb,
            decisions[i].action.workload,
        ),
    )
    used = 0.0
    keep: set[int] = set()
    for i in order:
        if used + decisions[i].memory_mb <= budget_mb + 1e-9:
            keep.add(i)
            used += decisions[i].memory_mb
    out: list[WarmDecision] = []
    dropped = 0
    for i, d in enumerate(decisions):
        if d.memory_mb > 0 and i not in keep:
            dropped += 1
            a = d.action
            text = (
                f"cool {a.workload} {a.from_instances} -> 0: wanted {a.to_instances} warm "
                f"({a.reason.message.split(': ', 1)[-1]}), but the total warm-memory budget of {budget_mb:g} MB "
                f"went to functions more likely to be called per MB"
            )
            reason = Reason("warm_budget_cut", text, {**a.reason.details, "budget_mb": budget_mb})
            out.append(replace(d, action=replace(a, to_instances=0, keep_warm_s=0.0, reason=reason), memory_mb=0.0))
        else:
            out.append(d)
    notes = [
        f"warm-memory budget {budget_mb:g} MB is short of the {total:g} MB wanted: {dropped} function(s) "
        f"left cold, keeping {used:g} MB for the most likely calls per MB"
    ]
    return out, notes


def plan_warm_pools(
    items: Sequence[tuple[WorkloadRef, PolicySpec, WorkloadState]],
    forecasts: Mapping[WorkloadRef, InvocationForecast],
    now: float,
    memory_budget_mb: float | None = None,
) -> tuple[list[WarmDecision], list[str]]:
    """Warm-pool decisions for many functions, within an optional total memory budget."""
    decisions = [decide_warm_pool(ref, spec, ws, forecasts.get(ref), now) for ref, spec, ws in items]
    if memory_budget_mb is None:
        return decisions, []
    return fit_memory_budget(decisions, memory_budget_mb)
