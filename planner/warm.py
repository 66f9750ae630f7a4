"""Warm pools for serverless functions: pre-warm before a likely call, keep warm while one is likely.

A cold start costs latency; a warm instance that nobody calls costs memory. A function is worth
keeping warm for the next step when the cold starts it expects to avoid are worth more than the
memory it expects to waste: with ``p`` the forecast probability of an invocation in that step
(``InvocationForecast``), ``m`` the memory of one instance and ``V`` what the policy says one
avoided cold start is worth in MB-minutes of idle warm memory (``warmPool.coldStartCostMbMinutes``),

    keep warm  <=>  p * V >= (1 - p) * m  <=>  p >= m / (m + V)   (the *break-even* probability)

so a small function is kept warm on weaker evidence than a large one (every cold start counts the
same, memory does not). ``warmPool.minProbability`` is a floor under the break-even (0 by default;
without ``coldStartCostMbMinutes`` it is the whole rule). The same forecast says for how long to
keep the instance warm (the run of coming steps that stay at or above the threshold, capped by
``warmPool.keepAliveSeconds``) and, when the function is not worth keeping warm now, when to
pre-warm it (the first coming step above the threshold).

Memory is bounded twice: per function by ``warmPool.memoryBudgetMb`` (and ``maxInstances``), and
across functions by an optional total budget, which keeps the instances that avoid the most
expected cold starts per MB of expected waste (``p / ((1 - p) * m)``) and says in each dropped
action's reason that the budget dropped it.

Pure: no I/O, no clock (docs/planner.md).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from planner.replicas import stale_limit
from scaleahead.policy import FallbackMode, PolicySpec, WarmPool
from scaleahead.types import InvocationForecast, Reason, SetWarmPool, WorkloadRef, WorkloadState


@dataclass(frozen=True, slots=True)
class WarmDecision:
    """One function's warm-pool decision, with what the total memory budget needs to know."""

    action: SetWarmPool
    fallback: str | None
    probability: float
    memory_mb: float


def _significant(x: float, digits: int = 2) -> str:
    """``x`` > 0 in fixed point with ``digits`` significant digits (0.0013, 0.000010)."""
    return f"{x:.{max(0, digits - 1 - math.floor(math.log10(x)))}f}"


def _decimals(threshold: float) -> int:
    """Decimals of ``threshold`` in percent: none from 10 %, one from 1 %, two significant digits
    below (a break-even of 0.0013 % must not read "0.0 %")."""
    if threshold >= 0.1 or threshold <= 0:
        return 0
    if threshold >= 0.01:
        return 1
    return max(0, 1 - math.floor(math.log10(threshold * 100)))


_EXACT = decimal.Context(prec=80)  # enough for every decimal _common_decimals may ask for
_MAX_DECIMALS = 30


def _rounded(p: float, decimals: int) -> decimal.Decimal:
    """``p`` in percent, rounded to ``decimals`` places from its exact binary value (half to even).

    The same digits as ``p`` as a fraction rounded to ``decimals + 2`` places: a chance and a
    percentage printed at the same precision are rounded alike (``p * 100`` as a float is not)."""
    return _EXACT.quantize(_EXACT.multiply(decimal.Decimal(p), 100), decimal.Decimal(1).scaleb(-decimals))


def _common_decimals(threshold: float, values: Sequence[float]) -> int:
    """Decimals (in percent) at which a reason prints ``threshold`` and the ``values`` compared with it.

    The threshold's own (``_decimals``), plus as many as it takes for each value that differs from
    it to print differently: rounding is monotone, so at one precision a value below the threshold
    never prints above it, and with the added digits it does not print equal to it either (review
    2026-12-07: "0.02 chance ... below the 1.5 % break-even"; "at most 1.5 % ... below the 1.5 %")."""
    d = _decimals(threshold)
    if threshold <= 0:  # "0 %": every value above it prints above it
        return d
    while d < _MAX_DECIMALS and any(
        v != threshold and _rounded(v, d) == _rounded(threshold, d) for v in values if math.isfinite(v)
    ):
        d += 1
    return d


def _pct(p: float, decimals: int) -> str:
    """A probability in percent at ``decimals`` places (``_common_decimals``); one that would read
    0 there, in two significant digits (it lies below half the last digit of the threshold, so it
    still prints below it)."""
    if p <= 0:
        return "0 %"
    q = _rounded(p, decimals)
    return f"{q:f} %" if q != 0 else f"{_significant(p * 100)} %"


def _chance(p: float, decimals: int) -> str:
    """A probability as a fraction, as precise as ``_pct`` at ``decimals`` (two more places)."""
    if p <= 0:
        return "0"
    q = _rounded(p, decimals)
    return f"{q.scaleb(-2):f}" if q != 0 else _significant(p)


def _minutes(seconds: float) -> str:
    return f"{round(seconds / 60, 2):g} min" if seconds >= 60 else f"{round(seconds, 1):g} s"


def _held(current: int, want: int) -> str:
    if want == current:
        return f"keep the current {current} warm instances"
    return f"keep {want} of the current {current} warm instances (the cap)"


def break_even_probability(memory_mb: float, cold_start_cost_mb_minutes: float | None, step_s: float = 60.0) -> float:
    """Probability of a call in the next step (``step_s`` long) at which one warm instance of
    ``memory_mb`` pays for itself (0 if no cost given).

    At ``p`` the expected cold starts avoided, ``p``, times their worth in MB-minutes equals the
    expected idle memory over the step, ``(1 - p) * memory_mb * step_s / 60`` MB-minutes. (Until
    2026-12-06 the step was taken as a minute whatever ``demand.stepSeconds`` was, so at 10-s
    steps a cold start was worth a sixth of the MB-minutes the policy gave: audit.)
    """
    if cold_start_cost_mb_minutes is None:
        return 0.0
    # step_s / 60 first: exactly 1 at 60-s steps, so there the rule is m / (m + V) to the last bit,
    # the rule the benchmarks ran (memory * 60 / 60 is not memory for every float)
    idle = memory_mb * (step_s / 60.0)
    return idle / (idle + cold_start_cost_mb_minutes)


def break_even_probabilities(
    memory_mb: npt.NDArray[np.float64], cold_start_cost_mb_minutes: float, step_s: float = 60.0
) -> npt.NDArray[np.float64]:
    """``break_even_probability`` for many functions at once, to the last bit the same: the
    warm-memory budget's replay (planner/warm_budget.py) and the benchmark's vectorized rule."""
    idle = np.asarray(memory_mb, dtype=np.float64) * (step_s / 60.0)
    out: npt.NDArray[np.float64] = idle / (idle + cold_start_cost_mb_minutes)
    return out


def warm_threshold(spec: PolicySpec) -> float:
    """The probability a function's next step needs to be kept warm: the break-even, floored by minProbability."""
    pool = spec.warm_pool
    return max(
        pool.min_probability,
        break_even_probability(pool.memory_mb_per_instance, pool.cold_start_cost_mb_minutes, spec.demand.step_seconds),
    )


def worth_per_mb(probability: float, memory_mb: float) -> float:
    """Expected cold starts avoided per MB-minute of expected idle memory: ``p / ((1 - p) * m)``;
    0 for a decision without a probability (a fallback: nothing says it is worth its memory more
    than one that has a forecast)."""
    if not math.isfinite(probability):
        return 0.0
    return probability / max((1.0 - probability) * memory_mb, 1e-12)


def instance_cap(spec: PolicySpec) -> int:
    """Most warm instances the policy allows (``maxInstances`` and the per-function memory budget)."""
    pool = spec.warm_pool
    cap = pool.max_instances
    if pool.memory_budget_mb is not None:
        cap = min(cap, int(math.floor(pool.memory_budget_mb / pool.memory_mb_per_instance + 1e-9)))
    return max(cap, 0)


def _cap_rule(pool: WarmPool, cap: int) -> str:
    """What limits a function to ``cap`` warm instances (``instance_cap``), for a reason."""
    if pool.memory_budget_mb is not None and cap < pool.max_instances:
        return f"the memory budget of {pool.memory_budget_mb:g} MB ({pool.memory_mb_per_instance:g} MB each)"
    return f"maxInstances {pool.max_instances}"


def _fault(forecast: InvocationForecast, now: float) -> str | None:
    """Why ``forecast`` cannot be read at ``now`` (None: it can; staleness and length are checked after).

    Its time must be finite with a positive step, its probabilities one per step, and those from
    the step ``now`` falls in on (all the decision may read) finite and within [0, 1].
    """
    origin, step = forecast.origin, forecast.step_s
    if not (math.isfinite(origin) and math.isfinite(step) and step > 0):
        return f"invocation forecast without a valid time (origin {origin:g}, step {step:g} s)"
    prob = np.asarray(forecast.probability)
    if prob.ndim != 1:
        return f"malformed invocation forecast (probabilities of shape {prob.shape}, not one per step)"
    if now - origin > step * prob.shape[0]:
        return None  # too short: said after (nothing of it is read)
    k0 = max(int(math.floor((now - origin) / step + 1e-9)), 0)
    read = prob[k0:].astype(np.float64, copy=False)
    if not np.all(np.isfinite(read)):
        return "invocation forecast not finite (NaN or infinite probabilities in the steps from now on)"
    if np.any((read < 0.0) | (read > 1.0)):
        return (
            f"invocation forecast probabilities outside [0, 1] ({float(read.min()):g} to {float(read.max()):g} "
            "in the steps from now on)"
        )
    return None


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
    threshold = warm_threshold(spec)
    cost = pool.cold_start_cost_mb_minutes
    mem = pool.memory_mb_per_instance
    fallback: str | None = None
    stale_after = spec.fallback.stale_after_seconds
    # A forecast the rule cannot read is none (as a service's, planner.replicas.decide_replicas):
    # without a valid time its steps cannot be placed (origin NaN crashed the whole plan), and a
    # NaN, infinite or out-of-[0, 1] probability is no evidence of "no call" or of a call (NaN
    # read as 0 cooled, NaN later steps counted as above the threshold). All the steps from the
    # current one on are checked: the pre-warm search and the horizon's maximum read every one.
    fault = _fault(forecast, now) if forecast is not None else None
    if fault is not None:
        forecast = None
    # The history behind the forecast may end before its origin (missing steps count as no call):
    # stale once its newest sample is older than staleAfterSeconds, or one step when that is longer.
    # No more slack than that: the forecaster counts the missing steps as no call, so a busy
    # function read two steps late would look idle and be cooled. A series that lags by a step
    # (a recording rule) wants staleAfterSeconds of two steps (docs/serverless.md).
    data_age = now - forecast.data_until if forecast is not None and forecast.data_until is not None else -math.inf
    old_data = data_age > max(stale_after, forecast.step_s if forecast is not None else 0.0)
    limit = stale_limit(spec)  # a step longer than staleAfterSeconds: one step
    stale = forecast is not None and (now - forecast.origin > limit or old_data)
    too_short = forecast is not None and forecast.origin + forecast.horizon_s <= now
    # Nothing from after the decision is read: a forecast made after now is none.
    ahead = forecast is not None and forecast.origin > now
    if forecast is None or stale or too_short or ahead:
        why = (
            (fault or "no invocation forecast")
            if forecast is None
            else "invocation forecast made after now"
            if ahead
            else (
                (f"stale invocation history (newest sample {_minutes(data_age)} old)" if old_data else "stale forecast")
                if stale
                else "forecast too short"
            )
        )
        fallback = spec.fallback.mode.value
        observed = state.observed_demand
        left = pool.keep_alive_seconds  # how long the fallback keeps what it keeps warm
        # an observation stamped after now is none (nothing from after the decision is read)
        seen = math.isfinite(observed) and math.isfinite(state.observed_at) and state.observed_at <= now
        if spec.fallback.mode == FallbackMode.REACTIVE and not seen:
            # Nothing could be observed (history read failed, no sample): missing data is not "no
            # call", so cooling now would only be undone once the history is back.
            want = min(current, cap)
            text = (
                f"{why}: fallback reactive, but no invocation count could be observed (no usable history): "
                f"{_held(current, want)} rather than cool on missing data"
            )
            # The rule that decided is `current`, as for a service's reactive fallback with nothing
            # observed (Plan.fallbacks, fallbackMode, scaleahead_fallback_active; issue review
            # 2026-12-07: a function said `reactive` where a service said `current`).
            fallback = FallbackMode.CURRENT.value
        elif spec.fallback.mode == FallbackMode.REACTIVE:
            # A fixed keep-alive: warm while the last call is at most keepAliveSeconds old. The
            # loop gives the last call within the keep-alive (last_active_at); a caller that does
            # not has only the last observation to go by.
            last = state.last_active_at  # NaN: not looked for; -inf: none within the keep-alive
            if last > now:  # stamped after now: not known at the decision
                last = math.nan
            if math.isnan(last) and observed > 0:
                last = state.observed_at
            keep_alive = _minutes(pool.keep_alive_seconds)
            # No sample since the newest one (older than staleAfterSeconds, or a step): not seen is
            # not "not called", so the warm pool is held, for at most the keep-alive past the
            # newest sample (a broken or renamed query must not pin memory for ever).
            silent = now - state.observed_at
            behind = silent > limit
            if math.isfinite(last) and now - last <= pool.keep_alive_seconds:
                want = max(min(1, cap), min(current, cap)) if behind else min(1, cap)
                ago = now - last
                # what is left of the keep-alive after the last call, not the whole of it (review
                # 2026-12-07: called 8 min ago, "keep warm for 10 min" under a 10-min keep-alive)
                left = max(pool.keep_alive_seconds - max(ago, 0.0), 0.0)
                when = f"{_minutes(ago)} ago" if ago > 0 else "in the newest step"
                text = f"{why}: fallback reactive, last invoked {when}, within the {keep_alive} keep-alive"
            elif behind and silent <= pool.keep_alive_seconds:
                want = min(current, cap)
                left = max(pool.keep_alive_seconds - silent, 0.0)  # at most the keep-alive past the newest sample
                text = (
                    f"{why}: fallback reactive, no invocation count observed for the last "
                    f"{_minutes(silent)}: {_held(current, want)} rather than cool on missing data, for at most "
                    f"the {keep_alive} keep-alive"
                )
            elif behind:
                want = 0
                text = (
                    f"{why}: fallback reactive, no invocation count observed for the last {_minutes(silent)}, "
                    f"longer than the {keep_alive} keep-alive: cool"
                )
            else:
                want = 0
                text = f"{why}: fallback reactive, no invocation in the last {keep_alive} (the keep-alive)"
        elif spec.fallback.mode == FallbackMode.STATIC:
            want = min(int(spec.fallback.static_replicas or 0), cap)
            text = f"{why}: fallback static {want} warm instances"
        else:
            want = min(current, cap)
            text = f"{why}: fallback keeps the current {current} warm instances"
            if want < current:
                text = f"{why}: fallback keeps the current warm instances, {want} of {current} within the cap"
        keep = left if want > 0 else 0.0
        details: dict[str, float | int | str] = {"fallback": fallback, "cause": why}
        if fallback != spec.fallback.mode.value:
            details["policy_fallback"] = spec.fallback.mode.value
        code = f"fallback_{fallback}"
        p_now = float("nan")
    else:
        k0 = min(max(int(math.floor((now - forecast.origin) / forecast.step_s + 1e-9)), 0), forecast.horizon_steps - 1)
        probs = forecast.probability[k0:]
        # how much of the step ``now`` falls in is gone: the times below count from now, not from
        # the step's start (the loop plans every 10 s on 60-s forecast steps)
        gone = min(max(now - (forecast.origin + k0 * forecast.step_s), 0.0), forecast.step_s)
        p_now = float(probs[0])
        idle = "never invoked before" if not math.isfinite(forecast.idle_s) else f"idle {_minutes(forecast.idle_s)}"
        step = "minute" if forecast.step_s == 60 else _minutes(forecast.step_s)
        warm_now = p_now >= threshold and cap > 0
        later = np.flatnonzero(probs[1:] >= threshold)
        # every number a sentence compares with the threshold, printed at one precision with it
        compared = [p_now] if warm_now else [p_now, float(probs[int(later[0]) + 1] if later.size else probs.max())]
        d = _common_decimals(threshold, compared)
        rule = (
            f"the {_pct(threshold, d)} break-even of {mem:g} MB warm against a cold start worth {cost:,.0f} MB-min"
            if cost is not None and threshold > pool.min_probability
            else f"the {_pct(threshold, d)} minimum"
        )
        chance = _chance(p_now, d)
        if warm_now:
            want = min(cap, max(1, current))
            below = np.flatnonzero(probs < threshold)
            run = int(below[0]) if below.size else len(probs)
            keep = min(max(run * forecast.step_s - gone, 0.0), pool.keep_alive_seconds)
            code = "warm_forecast"
            text = (
                f"{chance} chance of an invocation in the next {step} ({idle}) is above {rule}; "
                f"keep warm for {_minutes(keep)} while the forecast stays above it"
            )
            if want < current:  # the cap, not the forecast, cools it (audit: "cool 3 -> 2" named no cap)
                text += f"; {want} of the current {current} within {_cap_rule(pool, cap)}"
        else:
            want = 0
            keep = 0.0
            if cap == 0:
                code = "warm_no_budget"
                text = (
                    "maxInstances 0 allows no warm instance"
                    if pool.max_instances <= 0
                    else f"the memory budget of {pool.memory_budget_mb:g} MB allows no warm instance of {mem:g} MB"
                )
            elif later.size:
                k = int(later[0]) + 1
                code = "prewarm_later"
                text = (
                    f"{chance} chance of an invocation in the next {step} ({idle}) is below {rule}; "
                    f"pre-warm in {_minutes(k * forecast.step_s - gone)}, when it reaches {_pct(float(probs[k]), d)}"
                )
            else:
                code = "cold_ok"
                span = _minutes(len(probs) * forecast.step_s - gone)
                text = (
                    f"{chance} chance of an invocation in the next {step} ({idle}) and at most "
                    f"{_pct(float(probs.max()), d)} over the next {span}, below {rule}: not worth {mem:g} MB warm"
                )
        details = {"probability": p_now, "threshold": threshold, "idle_s": forecast.idle_s, "memory_mb": mem}
        if cost is not None:
            details["cold_start_cost_mb_min"] = cost
    verb = ("pre-warm" if current == 0 else "warm") if want > current else ("cool" if want < current else "hold")
    sentence = (
        f"hold {workload} at {current} warm: {text}"
        if verb == "hold"
        else f"{verb} {workload} {current} -> {want}: {text}"
    )
    action = SetWarmPool(workload, current, want, keep, Reason(code, sentence, details))
    return WarmDecision(action, fallback, p_now, want * mem)


_NONE: Mapping[int, str] = MappingProxyType({})


def fit_memory_budget(
    decisions: Sequence[WarmDecision],
    budget_mb: float,
    counted: Sequence[float] | None = None,
    *,
    scope: str = "",
    held_mb: float = 0.0,
    first: Collection[int] = (),
    refused: Mapping[int, str] = _NONE,
) -> tuple[list[WarmDecision], list[str]]:
    """Keep total warm memory within ``budget_mb``: drop the instances that avoid the fewest cold starts per MB.

    Instances are ranked by expected cold starts avoided per MB-minute of expected idle memory
    (``worth_per_mb``); a fallback decision without a probability ranks last. They are packed in
    that order, each kept if it fits in what is left: one that does not fit is dropped and the next
    ones are still tried, so a smaller, less worthy one can be kept after a larger one was dropped.

    ``counted[i]``: the memory decision ``i`` takes from the budget when it is kept, at most its
    ``memory_mb`` (None: ``memory_mb``). ``plan`` counts a function at most at what the capacity
    and the quotas could grant it, and at its grant once shared (``planner.planning``): the memory
    its cut instances would have held is then left for the functions the budget dropped. Ranks
    stay those of the wanted memory; a kept decision keeps its wanted instances (the sharing cuts
    them). ``first``: decisions packed before all others (in rank order among themselves): those
    an earlier packing kept, whose memory stays theirs. ``refused``: decisions not packed at all,
    dropped with the given reason instead of the budget's ("with it warm the capacity and quotas ...").

    ``scope``: what the budget is a part of, before its name ("shard 1/2's part of the "; "": the
    whole, "the total warm-memory budget"). ``held_mb``: memory the budget holds for functions not
    in ``decisions`` (the loop's unreadable ones, ``scaleahead.unread``); ``budget_mb`` is what is
    left after it, and the reasons and notes say so.

    Returns the decisions (in the same order, dropped ones cut to 0 warm instances with the reason
    extended) and notes for the plan.
    """
    name = f"{scope}warm-memory budget" if scope else "the total warm-memory budget"
    if held_mb > 0:
        name += f" ({budget_mb + held_mb:g} MB, {held_mb:g} MB of it held for functions whose state cannot be read)"
    else:
        name += f" of {budget_mb:g} MB"
    need = [d.memory_mb for d in decisions]
    if counted is not None:
        need = [min(c, m) for c, m in zip(counted, need, strict=True)]
    total = sum(need)
    if total <= budget_mb + 1e-9 and not refused:
        return list(decisions), []
    order = sorted(
        (i for i, m in enumerate(need) if m > 0 and i not in refused),
        key=lambda i: (
            i not in first,
            -worth_per_mb(decisions[i].probability, decisions[i].memory_mb),
            decisions[i].action.workload,
        ),
    )
    used = 0.0
    keep: set[int] = set()
    room: dict[int, float] = {}  # dropped -> MB left when its turn came (smaller, less worthy ones may fit after it)
    for i in order:
        if used + need[i] <= budget_mb + 1e-9:
            keep.add(i)
            used += need[i]
        else:
            room[i] = max(budget_mb - used, 0.0)
    out: list[WarmDecision] = []
    dropped = 0
    for i, d in enumerate(decisions):
        if need[i] > 0 and i not in keep:
            dropped += 1
            a = d.action
            head = (
                f"cool {a.workload} {a.from_instances} -> 0" if a.from_instances > 0 else f"hold {a.workload} at 0 warm"
            )
            ranked = (
                "went to functions that avoid more cold starts per MB of the warm pool they want"
                if math.isfinite(d.probability)
                else "went first to functions with a forecast (this one has none: its fallback's instances rank last)"
            )
            if first:  # re-packed: the functions an earlier packing kept came first, whatever their rank
                ranked = (
                    "went first to the functions an earlier packing kept, at what the capacity and quotas grant "
                    f"them, then {ranked.removeprefix('went ').removeprefix('first ')}"
                )
            its = (
                f"its {need[i]:g} MB"
                if need[i] >= d.memory_mb
                else f"its {need[i]:g} MB (of the {d.memory_mb:g} MB wanted: the capacity and quotas allow no more)"
            )
            wants = f"{head}: wanted {a.to_instances} warm ({a.reason.message.split(': ', 1)[-1]}), but "
            if i in refused:
                text = f"{wants}{refused[i]}"
            elif room[i] >= budget_mb - 1e-9:  # nothing was kept before it: the budget itself is too small
                left = f", {budget_mb:g} MB left" if held_mb > 0 else ""
                text = f"{wants}{its} did not fit in {name}{left}"
            else:
                # with memory held for unreadable functions, only what is left of it was given out by rank
                whose = f"of {name}, what is left " if held_mb > 0 else f"{name} "
                text = f"{wants}{whose}{ranked}: {its} did not fit in the {room[i]:g} MB left when its turn came"
            reason = Reason("warm_budget_cut", text, {**a.reason.details, "budget_mb": budget_mb})
            out.append(replace(d, action=replace(a, to_instances=0, keep_warm_s=0.0, reason=reason), memory_mb=0.0))
        else:
            out.append(d)
    granted = sum(1 for i, m in enumerate(need) if 0 < m < decisions[i].memory_mb)
    within = f" ({granted} function(s) counted at what the capacity and quotas allow them)" if granted else ""
    whose = f"{scope}warm-memory budget" if scope else "warm-memory budget"
    amount = f"{budget_mb:g} MB" + (f" (after the {held_mb:g} MB held for unreadable functions)" if held_mb > 0 else "")
    if total > budget_mb + 1e-9:
        notes = [
            f"{whose} {amount} is short of the {total:g} MB wanted{within}: {dropped} function(s) "
            f"left cold, keeping {used:g} MB for the most cold starts avoided per MB"
        ]
    else:  # only ``refused`` ones are cold
        notes = [
            f"{whose} {amount} holds the {total:g} MB wanted{within}, but {dropped} function(s) stay cold, as with "
            f"them warm the capacity and quotas would grant the others more than it holds; keeping {used:g} MB"
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
