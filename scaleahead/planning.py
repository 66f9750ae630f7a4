"""Dry-run planning from a trace: the work behind ``scaleahead plan`` (composition root).

History (a trace cut strictly before ``at``) -> forecast -> plan -> record. Nothing is applied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from forecaster import make_model
from forecaster.base import Forecaster, horizon_steps_for, without_glitches
from forecaster.registry import LEARNED
from planner import plan as make_plan
from scaleahead.errors import DataError
from scaleahead.observed import demand_trend, last_active_at, observed_demand
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.types import ClusterState, Forecast, Plan, Series, WorkloadRef, WorkloadState

DAY_S = 86400.0
#: Days of history before the decision time the model is fitted on (enough for daily seasonality).
FIT_DAYS = 7


@dataclass(frozen=True, slots=True)
class DryRun:
    plan: Plan
    forecasts: dict[WorkloadRef, Forecast]
    at: float
    history: Series
    model: str


def default_at(series: Series) -> float:
    """The default decision time: just after the last observed point."""
    finite = np.flatnonzero(np.isfinite(series.values))
    return series.start + (int(finite[-1]) + 1) * series.step_s


def _utc(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%dT%H:%M:%SZ}"


def check_history(series: Series, at: float, known_at_end: bool = True) -> Series:
    """The usable history before ``at``, or a DataError that says why there is none.

    ``known_at_end``: a sample covers its step from its timestamp on and is known when the step ends
    (traces and series CSVs: at ``--at`` 10:00:05 the 10 s sample stamped 10:00:00 is not known yet);
    False for points known at their timestamp (Prometheus evaluations).
    """
    past = series.known_by(at) if known_at_end else series.before(at)
    if len(past) == 0:
        raise DataError(
            f"Trace {series.name!r} has no data before --at {_utc(at)} (its first step starts at "
            f"{_utc(series.start)} and is known when it ends, {_utc(series.start + series.step_s)}).",
            "Choose a later --at.",
        )
    finite = np.isfinite(past.values)
    if not finite.any():
        raise DataError(f"Trace {series.name!r} has only missing values before --at.", "Choose another --at.")
    return past


#: Relative difference between a history's step and a policy's ``demand.stepSeconds`` still taken
#: as the same step (the step of a series CSV is the median spacing of its timestamps).
STEP_TOLERANCE = 0.01


def step_mismatch(policy: Policy, series: Series, source: str) -> str | None:
    """Why ``policy`` cannot be planned from ``series`` (its step differs), or None.

    The per-policy form of ``check_history_step``, for policies read from the cluster: one such
    policy is skipped (its status says why), the others are planned.
    """
    want, step = policy.spec.demand.step_seconds, series.step_s
    if math.isclose(want, step, rel_tol=STEP_TOLERANCE):
        return None
    return (
        f"demand.stepSeconds is {want:g} but the history {source} is at {step:g} s steps; it is not "
        f"resampled. Set demand.stepSeconds: {step:g} (with capacityPerReplica in the history's unit), "
        f"or run with a history sampled every {want:g} s"
    )


def check_history_step(policies: Sequence[Policy], series: Series, source: str) -> None:
    """A ``DataError`` naming every policy whose ``demand.stepSeconds`` is not the step of ``series``.

    History from a trace or a series CSV is planned at its own step (the median spacing of its
    timestamps), never resampled: a policy written for another step would be silently planned at
    the trace's, and demand counted per step (requests per 60 s) read as if per the policy's step.
    ``source`` names the history in the message (a trace name or a path).
    """
    step = series.step_s
    off = [p for p in policies if step_mismatch(p, series, source) is not None]
    if not off:
        return
    names = "; ".join(
        f"{p.metadata.namespace}/{p.metadata.name} has demand.stepSeconds {p.spec.demand.step_seconds:g}"
        for p in off[:5]
    ) + (f" (and {len(off) - 5} more policies)" if len(off) > 5 else "")
    want = off[0].spec.demand.step_seconds
    raise DataError(
        f"Policy {names}, but the history {source} is at {step:g} s steps (the median spacing of its "
        f"timestamps). It is not resampled: the plan would be made at {step:g} s, ignoring the policy's "
        "step, and demand counted per step would be read against capacityPerReplica in the wrong unit.",
        f"Set demand.stepSeconds: {step:g} in the policy (with capacityPerReplica in the history's unit) "
        f"to plan at the history's step, or give a history sampled every {want:g} s "
        f"(e.g. scaleahead history --step {want:g}s).",
    )


def dry_run(
    policies: Sequence[Policy],
    series: Series,
    at: float | None = None,
    model: str = "seasonal_naive",
    current_replicas: int | None = None,
    known_at_end: bool = True,
    interval_s: float = 10.0,
) -> DryRun:
    """Forecast and plan every policy's workload from one demand series at time ``at``, from the
    samples known by then (``check_history``). ``interval_s``: the control interval the plan's
    replicas cover after a start-up, as the loop's (``loop.interval_s``; until 2026-12-07 the demand
    step, 60 s longer than the loop's window on a 60-s series)."""
    check_history_step(policies, series, repr(series.name))
    at = default_at(series) if at is None else at
    past = check_history(without_glitches(series), at, known_at_end)  # a 1e42 glitch is a missing sample
    fitted: Forecaster = make_model(model)
    # Fit on the history before ``at``, bounded to the last FIT_DAYS days.
    fit_part = past.between(max(past.start, at - FIT_DAYS * DAY_S), at)
    # No data in the fit window: the history ends more than FIT_DAYS before ``at``. Say so instead
    # of the model's complaint about fitting on nothing.
    too_old: str | None = None
    if np.isfinite(fit_part.values).any():
        fitted.fit([fit_part])
    else:
        last = default_at(past) - past.step_s
        too_old = (
            f"the last sample of the history is at {datetime.fromtimestamp(last, UTC):%Y-%m-%dT%H:%M:%SZ}, "
            f"{(at - last) / DAY_S:.1f} days before the decision time, and the model is fitted on the "
            f"{FIT_DAYS} days before it. Choose an --at within the history, or give newer history."
        )
    forecasts: dict[WorkloadRef, Forecast] = {}
    workloads: dict[WorkloadRef, WorkloadState] = {}
    functions = {
        p.workload for p in policies if p.spec.workload_class == WorkloadClass.FUNCTION and p.spec.warm_pool.enabled
    }
    notes: list[str] = []
    if model in LEARNED and too_old is None:
        notes.append(
            f"model {model} was trained for this dry run on the {FIT_DAYS} days before the decision time; the "
            "control loop plans with the registry's champion instead (scaleahead models list), so its "
            "forecasts may differ"
        )
    for policy in policies:
        ref = policy.workload
        spec = policy.spec
        # check_history guarantees a finite sample, so there is an observed demand.
        observed, observed_at = observed_demand(past, spec.observed_window_seconds) or (math.nan, at)
        steps = horizon_steps_for(past.step_s)
        if too_old is not None:
            notes.append(f"{ref}: no forecast, planned with the {spec.fallback.mode.value} fallback: {too_old}")
        else:
            try:
                forecasts[ref] = fitted.forecast(ref, past, at, steps)
            except DataError as exc:  # planned with the policy's fallback; say why there is no forecast
                notes.append(f"{ref}: no forecast, planned with the {spec.fallback.mode.value} fallback: {exc}")
        per = spec.capacity_per_replica * spec.target_utilization
        # min: a huge observed demand (1.7e308 / 0.5 overflows to infinity) is at most maxReplicas anyway
        now_need = math.ceil(min(observed / per, spec.max_replicas)) if observed > 0 else spec.min_replicas
        replicas = (
            current_replicas
            if current_replicas is not None
            else max(spec.min_replicas, min(spec.max_replicas, now_need))
        )
        warm, active = 0, math.nan
        if ref in functions:
            # A function: its warm instances now and its last call within the keep-alive. Without
            # --current, warm as a platform keep-alive would leave it: one instance (at most
            # maxInstances) if it was called within warmPool.keepAliveSeconds before ``at``.
            keep = spec.warm_pool.keep_alive_seconds
            active = last_active_at(past, keep)
            recent = math.isfinite(active) and at - active <= keep
            warm = current_replicas if current_replicas is not None else min(int(recent), spec.warm_pool.max_instances)
        workloads[ref] = WorkloadState(
            ref,
            replicas=replicas,
            ready_replicas=replicas,
            observed_demand=observed,
            observed_at=observed_at,
            observed_trend=demand_trend(past, spec.ramp_floor.window_seconds),
            warm_instances=warm,
            last_active_at=active,
        )
    invocations = {}
    if functions:
        # The invocation forecasts the control loop makes (docs/serverless.md), from the same history.
        from scaleahead.loop import invocation_forecasts

        horizon_s = horizon_steps_for(past.step_s) * past.step_s
        invocations = invocation_forecasts(
            [p for p in policies if p.workload in functions], dict.fromkeys(functions, past), at, horizon_s
        )
    state = ClusterState(workloads=workloads)
    result = make_plan(forecasts, state, policies, at, interval_s=interval_s, invocations=invocations)
    if notes:
        result = Plan(result.created_at, result.actions, result.fallbacks, tuple(notes) + result.notes)
    return DryRun(result, forecasts, at, past, fitted.name)
