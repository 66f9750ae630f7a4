"""Replica decisions for services: ready before demand, never below current need.

The rule (docs/planner.md):

1. *Forecast need*: the policy's forecast quantile, at its peak over the window in which a replica
   asked for now would be ready and serving (``[now + startup, now + startup + interval]``),
   divided by ``capacityPerReplica * targetUtilization``.
2. *Reactive floor*: what the HPA rule needs for the demand observed now; a forecast alone never
   scales a service in below current need.
3. Scale-down stabilization (highest desired count over the window), step limits, min/max.

When the forecast is missing or stale the policy's named fallback decides instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaleahead.policy import FallbackMode, PolicySpec
from scaleahead.types import Forecast, Reason, ScaleTo, WorkloadRef, WorkloadState

#: Relative slack before rounding up, so float noise (e.g. 4.0000001) does not add a replica.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ReplicaDecision:
    action: ScaleTo
    fallback: str | None


def replicas_for(demand: float, spec: PolicySpec) -> int:
    """Replicas needed to serve ``demand`` at the target utilization."""
    if not math.isfinite(demand) or demand <= 0:
        return 0
    per_replica = spec.capacity_per_replica * spec.target_utilization
    return int(math.ceil(demand / per_replica - _EPS))


def _overlapping(origin: float, step: float, n: int, t0: float, t1: float) -> tuple[int, int]:
    """Index range ``[lo, hi)`` of the forecast steps that overlap ``[t0, t1)``, within ``[0, n)``."""
    lo = max(0, int(math.floor((t0 - origin) / step + 1e-9)))
    hi = min(n, int(math.ceil((t1 - origin) / step - 1e-9)))
    return lo, hi


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}".rstrip("0").rstrip(".")


def _clock(t: float) -> str:
    s = int(t) % 86400
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def decide_replicas(
    workload: WorkloadRef,
    spec: PolicySpec,
    state: WorkloadState,
    forecast: Forecast | None,
    now: float,
    interval_s: float = 10.0,
) -> ReplicaDecision:
    """Decide one service's replica count. Pure."""
    current = state.replicas
    unit = spec.demand.unit
    per = spec.capacity_per_replica
    observed_ok = math.isfinite(state.observed_demand) and math.isfinite(state.observed_at)
    fresh = observed_ok and now - state.observed_at <= spec.fallback.stale_after_seconds
    reactive = replicas_for(state.observed_demand, spec) if observed_ok else 0

    fallback: str | None = None
    old_forecast = forecast is not None and now - forecast.origin > spec.fallback.stale_after_seconds
    if (
        forecast is None
        or not fresh
        or old_forecast
        or forecast.origin + forecast.horizon_s < now + spec.startup_seconds
    ):
        if forecast is None:
            why = "no forecast"
        elif not fresh:
            why = "stale history"
        elif old_forecast:
            why = f"stale forecast (made {now - forecast.origin:.0f} s ago)"
        else:
            why = "forecast too short"
        fallback = spec.fallback.mode.value
        if spec.fallback.mode == FallbackMode.REACTIVE and observed_ok:
            desired = reactive
            code, text = (
                "fallback_reactive",
                (
                    f"{why}: fallback reactive, observed {_fmt(state.observed_demand)} {unit} "
                    f"at {_fmt(per)} {unit} per replica and {spec.target_utilization:g} target"
                ),
            )
        elif spec.fallback.mode == FallbackMode.STATIC:
            desired = int(spec.fallback.static_replicas or 0)
            code, text = "fallback_static", f"{why}: fallback static {desired} replicas"
        else:
            desired = current
            code, text = "fallback_current", f"{why}: fallback keeps the current {current} replicas"
        details: dict[str, float | int | str] = {"fallback": fallback, "cause": why}
    else:
        q = spec.forecast_quantile
        values = forecast.quantile(q)
        step = forecast.step_s
        n = len(values)
        t_ready = now + spec.startup_seconds
        t_end = t_ready + interval_s
        # Steps a replica asked for now would serve: those overlapping [now + startup, + interval].
        lo, hi = _overlapping(forecast.origin, step, n, t_ready, t_end)
        if lo >= hi:
            lo, hi = n - 1, n
        # Steps the replicas we have must serve: a replica removed now cannot be back before
        # now + startup, so we never remove one that the forecast needs before then, nor one it
        # needs within the scale-down stabilization window (a forecast-based stabilization).
        t_keep = max(t_end, now + spec.scale_down_stabilization_seconds)
        klo, khi = _overlapping(forecast.origin, step, n, now, t_keep)
        window = values[lo:hi]
        peak_i = int(window.argmax())
        peak = float(window[peak_i])
        peak_t = forecast.origin + (lo + peak_i) * step
        need = replicas_for(peak, spec)
        hold_peak = float(values[klo:khi].max()) if khi > klo else peak
        hold = replicas_for(hold_peak, spec)
        # The forecast missed: demand observed now is above even its top quantile for the steps
        # ahead. Then scale to what observed demand needs (a noisy step above the planning
        # quantile alone does not: that is what the quantile allows for).
        top_q = max(forecast.quantiles)
        top = forecast.quantiles[top_q]
        top_peak = float(top[lo:hi].max())
        missed = observed_ok and state.observed_demand > top_peak
        short_now = observed_ok and state.observed_demand > per * state.ready_replicas
        if reactive > need and reactive > current and (missed or short_now):
            desired = reactive
            code = "reactive_floor"
            why_now = (
                f"above even the p{top_q * 100:g} forecast {_fmt(top_peak)} {unit} (the forecast missed)"
                if missed
                else f"more than the {state.ready_replicas} ready replicas serve"
            )
            text = f"observed {_fmt(state.observed_demand)} {unit} needs {reactive} replicas now, {why_now}"
        elif need >= current:
            desired = need
            code = "forecast"
            text = (
                f"p{q * 100:g} forecast {_fmt(peak)} {unit} at {_clock(peak_t)}, "
                f"{peak_t - now:.0f} s ahead (start-up {spec.startup_seconds:.0f} s), "
                f"at {_fmt(per)} {unit} per replica and {spec.target_utilization:g} target"
            )
        else:
            floor = max(need, reactive, hold)
            desired = min(current, floor)
            if desired == current:
                code = "keep_until_replacement"
                text = (
                    f"p{q * 100:g} forecast peak {_fmt(hold_peak)} {unit} until {_clock(t_keep)} (start-up "
                    f"{spec.startup_seconds:.0f} s, stabilization {spec.scale_down_stabilization_seconds:.0f} s) "
                    f"needs {hold}; observed "
                    f"{_fmt(state.observed_demand)} {unit} needs {reactive}"
                )
            else:
                code = "forecast_down"
                text = (
                    f"p{q * 100:g} forecast peak {_fmt(hold_peak)} {unit} until {_clock(t_keep)} needs only "
                    f"{floor}, observed {_fmt(state.observed_demand)} {unit} needs {reactive}, "
                    f"at {_fmt(per)} {unit} per replica and {spec.target_utilization:g} target"
                )
        details = {
            "forecast_peak": peak,
            "peak_at": peak_t,
            "quantile": q,
            "forecast_replicas": need,
            "hold_replicas": hold,
            "reactive_replicas": reactive,
        }

    raw = desired
    # Scale-down stabilization: never below the highest desired count in the window.
    if desired < current and spec.scale_down_stabilization_seconds > 0:
        window_max = max(
            [d for t, d in state.recent_desired if now - t <= spec.scale_down_stabilization_seconds] or [desired]
        )
        if window_max > desired:
            desired = min(current, window_max)
            text += f"; held at {desired} by {spec.scale_down_stabilization_seconds:.0f} s scale-down stabilization"
    # Step limits.
    if desired > current + spec.max_step_up:
        desired = current + spec.max_step_up
        text += f"; limited to +{spec.max_step_up} per decision"
    if desired < current - spec.max_step_down:
        desired = current - spec.max_step_down
        text += f"; limited to -{spec.max_step_down} per decision"
    # Bounds.
    if desired < spec.min_replicas:
        desired = spec.min_replicas
        text += f"; raised to minReplicas {spec.min_replicas}"
    if desired > spec.max_replicas:
        desired = spec.max_replicas
        text += f"; capped at maxReplicas {spec.max_replicas}"
    verb = "scale" if desired != current else "hold"
    sentence = (
        f"{verb} {workload} {current} -> {desired}: {text}"
        if verb == "scale"
        else f"hold {workload} at {current}: {text}"
    )
    details = {**details, "raw_desired": raw}
    return ReplicaDecision(ScaleTo(workload, current, desired, Reason(code, sentence, details)), fallback)
