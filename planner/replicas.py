"""Replica decisions for services: ready before demand, never scaled in below current need.

The rule (docs/planner.md):

1. *Forecast need*: the demand level to provision for, at its peak over the window in which a
   replica asked for now would be ready and serving (``[now + startup, now + startup + interval]``),
   divided by ``capacityPerReplica * targetUtilization``. The level is chosen by the policy's
   objective (``provision_levels``): one more replica is added while the forecast probability that
   it is needed, times the value of a second not short (``objective.sloRisk``), is at least the cost
   of a replica-second (``objective.cost``). Or, if the policy sets ``forecastQuantile``, that fixed
   quantile.
2. *Reactive floor*: what the HPA rule needs for the demand observed now; a forecast alone never
   scales a service in below current need. Demand above even the forecast's top quantile (the
   forecast missed), or above what the ready replicas serve, scales up to that need at once.
   *Ramp floor*: while the observed demand of the last ``rampFloor.windowSeconds`` rises along a
   significant straight line (t statistic at least ``rampFloor.minTStat``), never below what that
   line reaches by the end of the first interval a replica asked for now serves
   (``now + startup + interval``).
3. Scale-down stabilization (highest desired count over the window, but with a forecast never more
   than the top quantile needs over the window), step limits, min/max.

When the forecast is missing, stale, malformed (quantile arrays that are not 1-D of one length,
or no steps) or does not cover what it must, the policy's named fallback decides instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from scaleahead.policy import FallbackMode, PolicySpec
from scaleahead.types import FloatArray, Forecast, Reason, ScaleTo, WorkloadRef, WorkloadState

#: Relative slack before rounding up, so float noise (e.g. 4.0000001) does not add a replica.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ReplicaDecision:
    action: ScaleTo
    fallback: str | None


def replicas_for(demand: float, spec: PolicySpec) -> int:
    """Replicas needed to serve ``demand`` at the target utilization.

    Exact for any finite ``demand``: one so large that ``demand / per replica`` overflows to
    infinity (1e308 at 0.5 per replica) is divided as exact rationals, never ``ceil(inf)``.
    """
    if not math.isfinite(demand) or demand <= 0:
        return 0
    per_replica = spec.capacity_per_replica * spec.target_utilization
    r = demand / per_replica
    if not math.isfinite(r):
        return -(-Fraction(demand) // Fraction(per_replica))
    return int(math.ceil(r - _EPS))


#: The objective never provisions above this quantile: beyond it the tail is pure extrapolation.
MAX_LEVEL = 0.9999


def _running_max(q: FloatArray) -> FloatArray:
    """``np.maximum.accumulate(q, axis=1)``, the same values, one whole ``[n, H]`` plane at a time.

    numpy's accumulate runs one short loop (K quantiles) per service and step: about 40 ms for
    10,000 services x 31 steps, most of a plan's budget; K - 1 plane-wide maxima take well under 1 ms.
    """
    out = np.empty_like(q)
    if q.shape[1]:
        out[:, 0] = q[:, 0]
    for j in range(1, q.shape[1]):
        np.maximum(out[:, j - 1], q[:, j], out=out[:, j])
    return out


def provision_levels(
    levels: tuple[float, ...], q: FloatArray, per: FloatArray, ratio: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """The demand level to provision for at every forecast step, and its quantile level.

    ``q`` is ``[n, K, H]``: forecast values at the ascending quantile ``levels`` (K >= 2), for n
    services and H steps; ``per`` ``[n]`` is the demand one replica serves at the target utilization
    and ``ratio`` ``[n]`` is ``objective.cost / objective.sloRisk``.

    The objective per step is ``cost * replicas + sloRisk * P(demand > per * replicas)``, so the
    k-th replica is worth adding while ``P(demand > per * (k - 1)) - P(demand > per * k) >= ratio``.
    Between the forecast's quantiles the distribution is taken as piecewise uniform; above the top
    one as exponential, with the scale ``b`` that passes through the top two quantiles. In that tail
    the rule is exact: provision up to the level ``1 - p`` with ``p = ratio / (1 - exp(-per / b))``.
    So a narrow forecast (b small next to one replica) gets a high quantile, since one replica
    removes most of the risk; a wide one gets a lower quantile, since one replica buys little.
    ``p`` is kept in ``[1 - MAX_LEVEL, 0.5]``: never below the median, never past ``MAX_LEVEL``.
    Both paths (``decide_replicas`` and planner/batch.py) call this function, so they agree exactly.
    """
    lv = np.asarray(levels, dtype=np.float64)
    qs = _running_max(q)  # never crossing, whatever the model gave
    top, prev = qs[:, -1, :], qs[:, -2, :]
    p_top, p_prev = float(lv[-1]), float(lv[-2])
    per2 = per[:, None]
    with np.errstate(all="ignore"):
        b = np.maximum(top - prev, 1e-9 * per2) / math.log((1.0 - p_prev) / (1.0 - p_top))
        p = np.clip(ratio[:, None] / -np.expm1(-per2 / b), 1.0 - MAX_LEVEL, 0.5)
        tau = 1.0 - p
        tail = top + b * np.log((1.0 - p_top) / p)
        j = np.clip(np.searchsorted(lv, tau), 1, lv.size - 1)
        lo_q = np.take_along_axis(qs, (j - 1)[:, None, :], axis=1)[:, 0, :]
        hi_q = np.take_along_axis(qs, j[:, None, :], axis=1)[:, 0, :]
        lo_p, hi_p = lv[j - 1], lv[j]
        inner = lo_q + (hi_q - lo_q) * np.clip((tau - lo_p) / (hi_p - lo_p), 0.0, 1.0)
    x: FloatArray = np.where(tau > p_top, tail, inner)
    # Below the lowest quantile the value is the lowest quantile's: named by its level.
    return x, np.maximum(tau, lv[0])


def _levels_of(forecast: Forecast, spec: PolicySpec) -> tuple[FloatArray, FloatArray]:
    """``provision_levels`` for one service (or its fixed ``forecastQuantile``): values and levels."""
    q = spec.forecast_quantile
    keys = sorted(forecast.quantiles)
    if q is not None or len(keys) < 2:
        level = forecast.quantile_key(q) if q is not None else keys[0]  # the level read, named as such
        values = forecast.quantiles[level]
        return values, np.full(values.shape, level)
    per = spec.capacity_per_replica * spec.target_utilization
    obj = spec.objective
    ratio = obj.cost / obj.slo_risk if obj.slo_risk > 0 else math.inf
    stack = np.stack([forecast.quantiles[k] for k in keys])[None]
    x, tau = provision_levels(tuple(keys), stack, np.array([per]), np.array([ratio]))
    return x[0], tau[0]


def _overlapping(origin: float, step: float, n: int, t0: float, t1: float) -> tuple[int, int]:
    """Index range ``[lo, hi)`` of the forecast steps that overlap ``[t0, t1)``, within ``[0, n)``."""
    lo = max(0, int(math.floor((t0 - origin) / step + 1e-9)))
    hi = min(n, int(math.ceil((t1 - origin) / step - 1e-9)))
    return lo, hi


def pct(level: float) -> str:
    """A quantile level as people write it: 0.9 -> "p90", 0.99731 -> "p99.7"."""
    # Enough digits to tell the level from p100 (0.9999 -> "p99.99", not "p100").
    digits = 3
    while digits < 8 and level < 1 and float(f"{level * 100:.{digits}g}") >= 100:
        digits += 1
    return "p" + f"{level * 100:.{digits}g}".rstrip(".")


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}".rstrip("0").rstrip(".")


def _clock(t: float) -> str:
    s = int(t) % 86400
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass(slots=True)
class Basis:
    """What one replica decision rests on: everything its sentence and details are made of.

    Both the reference ``decide_replicas`` and the batch path (planner/batch.py) fill one in and
    hand it to ``explain``, so the two can never word a decision differently.
    """

    code: str
    reactive: int
    raw: int = 0
    why: str = ""
    peak: float = math.nan
    peak_t: float = math.nan
    level: float = math.nan
    need: int = 0
    hold_peak: float = math.nan
    hold_level: float = math.nan
    hold_t: float = math.nan  # when the hold's peak is forecast
    hold_soon: bool = False  # its step overlaps [now, now + startup + interval]: a removed replica is not back
    t_keep: float = math.nan
    hold: int = 0
    floor: int = 0
    top_q: float = 0.0
    top_peak: float = math.nan
    missed: bool = False
    held: int | None = None
    held_note: bool = False
    top_hold: float = math.nan
    step_up: bool = False
    step_down: bool = False
    raised: bool = False
    capped: bool = False
    churn_kept: int = 0  # replicas a scale-down would have removed, kept because of objective.churn
    churn_saving: float = 0.0  # the replica-seconds that scale-down would have saved
    ramp: int = 0  # replicas the ramp floor asked for (when it decided)
    ramp_demand: float = math.nan  # where the observed rise leads by ramp_t
    ramp_t: float = math.nan  # the end of the first interval a replica asked for now serves


def ramp_floor(spec: PolicySpec, state: WorkloadState, now: float, interval_s: float) -> tuple[int, float, float]:
    """The ramp floor: ``(replicas, demand, at)``; ``(0, nan, at)`` when the demand is not rising steadily.

    ``demand`` is where the line fitted to the observed demand (``state.observed_trend``) leads at
    ``at = now + startup + interval``, the end of the window a replica asked for now would serve;
    counted only when the line rises with a t statistic of at least ``rampFloor.minTStat`` and ends
    no later than ``now``.
    """
    at = now + spec.startup_seconds + interval_s
    tr = state.observed_trend
    rf = spec.ramp_floor
    if (
        tr is None
        or rf.window_seconds <= 0
        or not tr.slope > 0
        or not tr.t_stat >= rf.min_t_stat
        or not math.isfinite(tr.level)
        or not math.isfinite(tr.at)
        or tr.at > now  # a line ending after now read samples from the future (no peeking)
    ):
        return 0, math.nan, at
    demand = tr.level + tr.slope * max(0.0, at - tr.at)
    return replicas_for(demand, spec), demand, at


def churn_window(spec: PolicySpec, interval_s: float) -> float:
    """Seconds over which a scale-down's saving is counted: the stabilization window, at least one interval."""
    return max(interval_s, spec.scale_down_stabilization_seconds)


def _objective(spec: PolicySpec) -> str:
    """Why the objective chose its level, in words."""
    obj = spec.objective
    if obj.slo_risk <= 0:
        return "the objective weighs only cost, so the median"
    own = obj._slo_risk_policy
    adapted = (
        f" (sloRisk {_fmt(obj.slo_risk)}: the policy's {_fmt(own)} x{obj.slo_risk / own:.3g} by the risk adaptation)"
        if own is not None and own > 0
        else ""
    )
    return (
        f"where one more replica stops paying for itself, a second short weighing "
        f"{_fmt(obj.slo_risk / obj.cost) if obj.cost > 0 else 'infinitely many'} replica-seconds{adapted}"
    )


def explain(
    workload: WorkloadRef,
    spec: PolicySpec,
    state: WorkloadState,
    now: float,
    desired: int,
    b: Basis,
    interval_s: float = 10.0,
) -> tuple[str, dict[str, float | int | str]]:
    """The sentence and details of a replica decision."""
    current = state.replicas
    unit = spec.demand.unit
    per = spec.capacity_per_replica
    target = f"at {_fmt(per)} {unit} per replica and {spec.target_utilization:g} target"
    window = spec.observed_window_seconds
    seen = f"observed {_fmt(state.observed_demand)} {unit}" + (f" ({window:g} s mean)" if window > 0 else "")
    details: dict[str, float | int | str]
    if b.code.startswith("fallback_"):
        if b.code == "fallback_reactive":
            text = f"{b.why}: fallback reactive, {seen} {target}"
            age = now - state.observed_at
            if age > stale_limit(spec):
                text += (
                    f"; that observation is {age:.0f} s old (staleAfterSeconds "
                    f"{spec.fallback.stale_after_seconds:g}{_or_step(spec)}), so it may scale out but not in"
                )
        elif b.code == "fallback_static":
            text = f"{b.why}: fallback static {int(spec.fallback.static_replicas or 0)} replicas"
        elif spec.fallback.mode == FallbackMode.REACTIVE:  # nothing observed to react to
            text = (
                f"{b.why}: fallback reactive has no observed demand to react to, so it keeps the current "
                f"{current} replicas"
            )
        else:
            text = f"{b.why}: fallback keeps the current {current} replicas"
        # the reactive need, for the floor under shortage (``planner.planning``: a merged plan
        # reads it here; until 2026-12-07 a fallback's had none, a review)
        details = {"fallback": b.code.removeprefix("fallback_"), "cause": b.why, "reactive_replicas": b.reactive}
        if details["fallback"] != spec.fallback.mode.value:
            details["policy_fallback"] = spec.fallback.mode.value
    else:
        if b.code == "reactive_floor":
            why_now = (
                f"above even the p{b.top_q * 100:g} forecast {_fmt(b.top_peak)} {unit} (the forecast missed)"
                if b.missed
                else f"more than the {state.ready_replicas} ready replicas serve"
                if state.observed_demand > per * state.ready_replicas
                else f"more than the {b.need} the {pct(b.level)} forecast needs (never below what demand "
                f"observed now needs)"
            )
            text = f"{seen} needs {b.reactive} replicas now {target}, {why_now}"
        elif b.code == "forecast":
            text = (
                f"{pct(b.level)} forecast {_fmt(b.peak)} {unit} at {_clock(b.peak_t)}, "
                f"{b.peak_t - now:.0f} s ahead (start-up {spec.startup_seconds:.0f} s), {target}"
            )
            if spec.forecast_quantile is None:
                text += f" ({pct(b.level)}: {_objective(spec)})"
            elif b.level != spec.forecast_quantile:
                where = "the nearest above it" if b.level > spec.forecast_quantile else "its top one"
                text += f" (the forecast has no {pct(spec.forecast_quantile)}: {where})"
        elif b.code == "ramp_floor":
            tr = state.observed_trend
            assert tr is not None  # the ramp floor decides only with a trend
            per_min = tr.slope * 60.0
            rate = _fmt(per_min) if per_min >= 0.01 else f"{per_min:.2g}"
            rel = f" ({per_min / tr.level:.1%})" if tr.level > 0 else ""
            min_t = spec.ramp_floor.min_t_stat
            fit = "a perfect straight line" if math.isinf(tr.t_stat) else f"t = {_fmt(tr.t_stat)} >= {min_t:g}"
            text = (
                f"observed demand rose {rate} {unit} a minute{rel} over the last {tr.window_s:g} s "
                f"({tr.samples} samples, {fit}); at that pace "
                f"{_fmt(b.ramp_demand)} {unit} by {_clock(b.ramp_t)}, the end of the first interval a replica "
                f"asked for now serves (start-up {spec.startup_seconds:.0f} s), needs {b.ramp} {target}; "
                f"the {pct(b.level)} forecast needs {b.need}, {seen} needs {b.reactive}"
            )
        elif b.code == "keep_until_replacement":
            # Why a peak that has not come yet keeps replicas now: a replica removed now cannot be
            # back before it (policy docs audit: "needs 3" alone did not say so), or it falls in
            # the scale-down stabilization window.
            when = (
                f"before a replica removed now could be back (start-up {spec.startup_seconds:.0f} s, then one "
                f"{interval_s:g} s interval)"
                if b.hold_soon
                else f"within the {spec.scale_down_stabilization_seconds:.0f} s scale-down stabilization window "
                f"(until {_clock(b.t_keep)})"
            )
            text = (
                f"{pct(b.hold_level)} forecast peak {_fmt(b.hold_peak)} {unit} at {_clock(b.hold_t)} needs {b.hold}, "
                f"{when}; {seen} needs {b.reactive}"
            )
        else:
            text = (
                f"{pct(b.hold_level)} forecast peak {_fmt(b.hold_peak)} {unit} until {_clock(b.t_keep)} needs only "
                f"{b.floor}, {seen} needs {b.reactive}, {target}"
            )
        details = {
            "forecast_peak": b.peak,
            "peak_at": b.peak_t,
            "quantile": b.level,
            "forecast_replicas": b.need,
            "hold_replicas": b.hold,
            "reactive_replicas": b.reactive,
        }
        if b.code == "ramp_floor":
            details["ramp_replicas"] = b.ramp
            details["ramp_demand"] = b.ramp_demand
    if b.held is not None:
        stab = f"{spec.scale_down_stabilization_seconds:.0f} s"
        text += f"; held at {min(current, b.held)} by {stab} scale-down stabilization"
        if b.held_note and not math.isfinite(b.top_hold):  # a fallback: no forecast capped it
            text += f" (not above maxReplicas {spec.max_replicas})"
        elif b.held_note:
            # the window the cap reads: until the stabilization window's end or, when later, the
            # end of the first interval a replica asked for now would serve (audit: "in that
            # window" named the stabilization window alone)
            text += (
                f" (not above the {b.held} that the p{b.top_q * 100:g} forecast peak "
                f"{_fmt(b.top_hold)} {unit} needs until {_clock(b.t_keep)})"
            )
    if b.churn_kept:
        text += (
            f"; not removing {b.churn_kept}: that saves {_fmt(b.churn_saving)} replica-seconds over the next "
            f"{churn_window(spec, interval_s):.0f} s, less than the two scale events it may cost "
            f"(objective.churn {_fmt(spec.objective.churn)} each)"
        )
    # The bounds win over the step limits (the actuator's safety layer applies them so too): a
    # current count outside the bounds goes into them at once, which the sentence says, not a step
    # limit that was overridden.
    if b.step_up and not b.raised:
        text += f"; limited to +{spec.max_step_up} per decision"
    if b.step_down and not b.capped:
        text += f"; limited to -{spec.max_step_down} per decision"
    if b.raised:
        text += f"; raised to minReplicas {spec.min_replicas}"
        if desired - current > spec.max_step_up:
            text += f" at once, beyond the +{spec.max_step_up} step limit (the current {current} is below it)"
    if b.capped:
        text += f"; capped at maxReplicas {spec.max_replicas}"
        if current - desired > spec.max_step_down:
            text += f" at once, beyond the -{spec.max_step_down} step limit (the current {current} is above it)"
    sentence = (
        f"scale {workload} {current} -> {desired}: {text}"
        if desired != current
        else f"hold {workload} at {current}: {text}"
    )
    return sentence, {**details, "raw_desired": b.raw}


class _Windows(NamedTuple):
    """What one usable forecast says over the windows a decision reads (``_windows``)."""

    peak: float  # the provisioned level's peak over [now + startup, + interval]
    peak_t: float
    level: float
    hold_peak: float  # its peak over [now, t_keep]
    hold_level: float
    hold_t: float
    hold_soon: bool  # that peak's step overlaps [now, now + startup + interval]
    t_keep: float
    top_q: float
    top_peak: float  # the top quantile's peak over the first window
    top_hold: float  # and over the second


def _windows(forecast: Forecast, spec: PolicySpec, now: float, interval_s: float) -> _Windows:
    """The forecast's peaks over the steps a replica asked for now would serve and the steps the
    replicas we have must serve (a forecast-based scale-down stabilization)."""
    values, levels = _levels_of(forecast, spec)
    step = forecast.step_s
    n = len(values)
    t_ready = now + spec.startup_seconds
    t_end = t_ready + interval_s
    # Steps a replica asked for now would serve: those overlapping [now + startup, + interval].
    lo, hi = _overlapping(forecast.origin, step, n, t_ready, t_end)
    if lo >= hi:  # it starts where the horizon ends (never before its start: origin <= now, startup >= 0)
        lo, hi = n - 1, n
    # Steps the replicas we have must serve: a replica removed now cannot be back before
    # now + startup, so we never remove one that the forecast needs before then, nor one it
    # needs within the scale-down stabilization window.
    t_keep = max(t_end, now + spec.scale_down_stabilization_seconds)
    klo, khi = _overlapping(forecast.origin, step, n, now, t_keep)
    window = values[lo:hi]
    peak_i = int(window.argmax())
    peak = float(window[peak_i])
    level = float(levels[lo + peak_i])
    if khi > klo:
        hold_i = klo + int(values[klo:khi].argmax())
        hold_peak, hold_level = float(values[hold_i]), float(levels[hold_i])
        hold_t, hold_soon = forecast.origin + hold_i * step, hold_i < hi
    else:
        hold_peak, hold_level, hold_t, hold_soon = peak, level, forecast.origin + (lo + peak_i) * step, True
    top_q = max(forecast.quantiles)
    top = forecast.quantiles[top_q]
    top_peak = float(top[lo:hi].max())
    # The most the stabilization may hold: what even the top quantile needs until t_keep.
    top_hold = float(top[klo:khi].max()) if khi > klo else top_peak
    return _Windows(
        peak,
        forecast.origin + (lo + peak_i) * step,
        level,
        hold_peak,
        hold_level,
        hold_t,
        hold_soon,
        t_keep,
        top_q,
        top_peak,
        top_hold,
    )


def shape_fault(forecast: Forecast) -> str | None:
    """Why the quantile arrays of ``forecast`` (at least one) are not one horizon; None when they are.

    Every array must be 1-D, of one length, and that length more than 0: the windows read every
    quantile at the same steps, and ``Forecast.horizon_s`` reads the first array's length.
    """
    shapes = set(map(np.shape, forecast.quantiles.values()))
    if len(shapes) > 1 or len(first := next(iter(shapes))) != 1:
        return "malformed forecast (its quantiles are not 1-D arrays of one length)"
    if first[0] == 0:
        return "forecast too short (no steps)"
    return None


def history_cause(state: WorkloadState, now: float) -> str:
    """Why the observed history cannot be used (the fallback's cause): stale, or stamped after ``now``."""
    if state.observed_at > now:  # data from after the decision: a clock skew or a replay reading ahead
        return f"observed demand stamped after now ({state.observed_at - now:g} s ahead)"
    return "stale history"


def stale_limit(spec: PolicySpec) -> float:
    """How old the newest observation and the forecast's origin may be before a service's history
    or forecast is stale: ``fallback.staleAfterSeconds``, or one ``demand.stepSeconds`` when that is
    longer. A point ends its step, so between two points the newest one ages by a whole step with
    Prometheus fully up to date: a 5-minute recording rule under the default 60 s would fall back
    in four cycles of five."""
    return max(spec.fallback.stale_after_seconds, spec.demand.step_seconds)


def _or_step(spec: PolicySpec) -> str:
    """ ", or one step: 300 s" where the step is the longer limit (the reason's wording)."""
    step = spec.demand.step_seconds
    return f", or one step: {step:g} s" if step > spec.fallback.stale_after_seconds else ""


def _observed_ok(state: WorkloadState, now: float) -> bool:
    """Whether ``state`` holds an observation: one stamped after now is none (nothing from after
    the decision is read)."""
    return math.isfinite(state.observed_demand) and math.isfinite(state.observed_at) and state.observed_at <= now


def observed_need(spec: PolicySpec, state: WorkloadState, now: float) -> int:
    """The reactive need: the replicas demand observed now needs (0 with no observation)."""
    return replicas_for(state.observed_demand, spec) if _observed_ok(state, now) else 0


def decide_replicas(
    workload: WorkloadRef,
    spec: PolicySpec,
    state: WorkloadState,
    forecast: Forecast | None,
    now: float,
    interval_s: float = 10.0,
) -> ReplicaDecision:
    """Decide one service's replica count. Pure. The reference for planner/batch.py."""
    current = state.replicas
    observed_ok = _observed_ok(state, now)
    fresh = observed_ok and now - state.observed_at <= stale_limit(spec)
    reactive = observed_need(spec, state, now)

    fallback: str | None = None
    why = ""
    win: _Windows | None = None
    if forecast is None:
        why = "no forecast"
    elif not forecast.quantiles:
        why = "empty forecast (no quantiles)"
    elif (fault := shape_fault(forecast)) is not None:
        why = fault
    elif not (math.isfinite(forecast.origin) and math.isfinite(forecast.step_s) and forecast.step_s > 0):
        why = f"forecast without a valid time (origin {forecast.origin}, step {forecast.step_s} s)"
    elif not fresh:
        why = history_cause(state, now)
    elif forecast.origin > now:
        why = f"forecast made after now (origin {forecast.origin - now:g} s ahead)"
    elif now - forecast.origin > stale_limit(spec):
        why = f"stale forecast (made {now - forecast.origin:.0f} s ago)"
    elif forecast.origin + forecast.horizon_s < now + spec.startup_seconds:
        why = "forecast too short"
    else:
        win = _windows(forecast, spec, now, interval_s)
        if not all(map(math.isfinite, (win.peak, win.hold_peak, win.top_peak, win.top_hold))):
            why, win = "forecast not finite (NaN or infinite values in the steps it must cover)", None
    if win is None:
        if spec.fallback.mode == FallbackMode.REACTIVE and observed_ok:
            # An observation older than staleAfterSeconds may scale out but never in: demand may
            # have risen since (the HPA, too, does not scale in without fresh metrics).
            desired = reactive if fresh else max(current, reactive)
            b = Basis("fallback_reactive", reactive, why=why)
        elif spec.fallback.mode == FallbackMode.STATIC:
            desired = int(spec.fallback.static_replicas or 0)
            b = Basis("fallback_static", reactive, why=why)
        else:
            desired = current
            b = Basis("fallback_current", reactive, why=why)
        # The rule that decided: a reactive fallback with nothing observed keeps the current count,
        # and says so (loop reasons audit: status and metrics named "reactive" for it).
        fallback = b.code.removeprefix("fallback_")
        stab_cap, top_hold, top_q = spec.max_replicas, math.inf, 0.0
    else:
        need = replicas_for(win.peak, spec)
        hold = replicas_for(win.hold_peak, spec)
        top_q, top_peak = win.top_q, win.top_peak
        # Never below what demand observed now needs at the target utilization (the reactive
        # rule). Until 2026-12-07 this floor held only when the forecast missed (demand observed
        # above even its top quantile) or the ready replicas ran short, so a higher forecast could
        # mean fewer replicas (a forecast of 45 req/s held 5 where one of 30 scaled to the 6 that
        # 48 req/s observed needs); on the long validations the narrower floor decided the same
        # within 3 short steps of 5,295 (docs/benchmarks.md). The reason says which case it is.
        missed = observed_ok and state.observed_demand > top_peak
        floor = 0
        if reactive > need and reactive > current:
            desired = reactive
            code = "reactive_floor"
        elif need >= current:
            desired = need
            code = "forecast"
        else:
            floor = max(need, reactive, hold)
            desired = min(current, floor)
            code = "keep_until_replacement" if desired == current else "forecast_down"
        ramp, ramp_demand, ramp_t = ramp_floor(spec, state, now, interval_s)
        if ramp > desired:
            desired, code = ramp, "ramp_floor"
        b = Basis(
            code, reactive, peak=win.peak, peak_t=win.peak_t, level=win.level, need=need, hold_peak=win.hold_peak,
            hold_level=win.hold_level, hold_t=win.hold_t, hold_soon=win.hold_soon, t_keep=win.t_keep, hold=hold,
            floor=floor, top_q=top_q, top_peak=top_peak, missed=missed,
        )  # fmt: skip
        if code == "ramp_floor":
            b.ramp, b.ramp_demand, b.ramp_t = ramp, ramp_demand, ramp_t
        top_hold = win.top_hold
        stab_cap = replicas_for(top_hold, spec)

    b.raw = desired
    b.top_q = top_q
    # Scale-down stabilization: never below the highest desired count in the window.
    if desired < current and spec.scale_down_stabilization_seconds > 0:
        window_max = max(
            [d for t, d in state.recent_desired if 0 <= now - t <= spec.scale_down_stabilization_seconds] or [desired]
        )
        # With a usable forecast, the window never holds more than the top quantile needs over it:
        # a count set for a spike the forecast now rules out (at its p99) is released.
        held = min(window_max, max(desired, stab_cap))
        if held > desired:
            desired = min(current, held)
            b.held = held
            b.held_note = held < min(current, window_max)
            b.top_hold = top_hold
    # Churn: a scale-down must save at least the two scale events it may cost (down now, up again).
    obj = spec.objective
    if desired < current and obj.churn > 0:
        saving = (current - desired) * obj.cost * churn_window(spec, interval_s)
        if saving < 2.0 * obj.churn:
            b.churn_kept, b.churn_saving = current - desired, saving
            desired = current
    # Step limits.
    if desired > current + spec.max_step_up:
        desired = current + spec.max_step_up
        b.step_up = True
    if desired < current - spec.max_step_down:
        desired = current - spec.max_step_down
        b.step_down = True
    # Bounds.
    if desired < spec.min_replicas:
        desired = spec.min_replicas
        b.raised = True
    if desired > spec.max_replicas:
        desired = spec.max_replicas
        b.capped = True
    sentence, details = explain(workload, spec, state, now, desired, b, interval_s)
    return ReplicaDecision(ScaleTo(workload, current, desired, Reason(b.code, sentence, details)), fallback)
