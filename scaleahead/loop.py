"""The control loop: ``run_once(deps, settings, now) -> CycleReport`` and a ticker around it.

One cycle: history (strictly before ``now``) -> forecast -> read cluster state -> learn start-up
delays -> warm-memory budgets (``scaleahead.warm_budgets``) -> risk adaptation (``planner.risk``:
each service's sloRisk against an HPA simulated on the same demand) -> plan -> record plan (journal state
``planned``) -> apply -> journal outcome. A workload
whose target reports enough readiness times is planned with the learned start-up delay
(``planner.startup``) instead of its policy's ``startupSeconds``. Each phase is timed. A workload whose
history or forecast fails falls back by its policy (the planner's named fallback) and the others
go on. A workload whose state the target could not read (``ClusterState.unreadable``) is reported
under its key at stage ``state`` and left out of the cycle's plan (no action, nothing journaled).
Used by the demo (virtual clock, simulated cluster), ``scaleahead run`` and the tests.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from actuator.applying import Actuator
from actuator.base import ActionResult, Target, apply_plan
from actuator.rollouts import RolloutView
from forecaster.base import Forecaster, horizon_steps_for, without_glitches
from forecaster.invocations import InvocationForecaster
from planner import plan as make_plan
from planner.rebalance import RebalanceWeights, with_forecast_peaks
from planner.risk import RiskBook, adapts
from planner.startup import StartupEstimate, estimate_for
from planner.table import policy_table
from planner.warm_budget import RECALIBRATE_STEPS, budget_period
from scaleahead.clock import Clock
from scaleahead.observed import aligned_counts, demand_trends, last_active_at, last_finite, observed_demand
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.settings import Settings
from scaleahead.types import (
    Action,
    ClusterState,
    Forecast,
    InvocationForecast,
    MovePod,
    Plan,
    Reason,
    Series,
    WorkloadRef,
    WorkloadState,
)
from scaleahead.unread import UnreadBook
from scaleahead.warm_budgets import WarmBudgetBook
from storage import Store

log = logging.getLogger("scaleahead.loop")


class HistorySource(Protocol):
    """Demand history per workload, only values strictly before ``now``."""

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]: ...


class StartupBook:
    """Policies with their learned start-up delay, cached across cycles.

    Per policy it keeps the last readiness samples, their estimate and the policy copy planned
    with; a cycle whose samples did not change reuses all three, and a changed estimate with the
    same delay reuses the copy. So 1,000 workloads cost about a millisecond per cycle, and the
    planner's per-spec work sees the same spec object from cycle to cycle.

    A target that names the pods its readiness times come from (``WorkloadState.startup_pods``:
    Kubernetes, which reports only pods created in the last hour) has each pod's first readiness
    time kept here, by pod, beyond that hour: the newest ``KEPT_WINDOWS`` x the policy's
    ``startupLearning.window`` per workload, for as long as the process runs. A pod's time is the
    first one seen: a later Ready transition (a readiness flap) does not replace it.
    """

    #: Readiness times kept per workload, as a multiple of its ``startupLearning.window``.
    KEPT_WINDOWS = 2

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Policy, tuple[float, ...], StartupEstimate, Policy]] = {}
        # per workload: the pods last reported, each pod's first readiness time (oldest first), and
        # those times as the tuple handed to the estimate
        self._kept: dict[WorkloadRef, tuple[tuple[str, ...], dict[str, float], tuple[float, ...]]] = {}

    def _samples(self, policy: Policy, ws: WorkloadState | None) -> tuple[float, ...]:
        """The readiness times to learn ``policy``'s workload's delay from: kept by pod when the
        target names its pods, else as reported."""
        ref = policy.workload
        kept = self._kept.get(ref)
        if ws is None or (not ws.startup_pods and not ws.startup_samples):
            return kept[2] if kept is not None else ()  # none reported now: what was seen before
        pods = ws.startup_pods
        if len(pods) != len(ws.startup_samples):  # the target does not name its pods: as reported
            return ws.startup_samples
        if kept is not None and kept[0] == pods:
            return kept[2]
        times = kept[1] if kept is not None else {}
        for pod, seconds in zip(pods, ws.startup_samples, strict=True):
            times.setdefault(pod, seconds)  # the first readiness time seen for a pod stays
        limit = self.KEPT_WINDOWS * policy.spec.startup_learning.window
        while len(times) > limit:
            del times[next(iter(times))]
        entry = self._kept[ref] = (pods, times, tuple(times.values()))
        return entry[2]

    def apply(
        self, policies: Sequence[Policy], state: ClusterState
    ) -> tuple[list[Policy], dict[WorkloadRef, StartupEstimate]]:
        """The policies to plan with and, per workload with readiness samples, its estimate."""
        out: list[Policy] = []
        estimates: dict[WorkloadRef, StartupEstimate] = {}
        cache: dict[int, tuple[Policy, tuple[float, ...], StartupEstimate, Policy]] = {}
        workloads = state.workloads
        for policy in policies:
            ref = policy.workload
            samples = self._samples(policy, workloads.get(ref))
            if not samples:
                out.append(policy)
                continue
            key = id(policy)
            hit = self._cache.get(key)
            if hit is not None and hit[0] is policy and hit[1] == samples:
                entry = hit
            else:
                est = estimate_for(policy.spec, samples)
                if hit is not None and hit[0] is policy and hit[2].seconds == est.seconds:
                    effective = hit[3]
                elif est.seconds == policy.spec.startup_seconds:
                    effective = policy
                else:
                    spec = policy.spec.model_copy(update={"startup_seconds": est.seconds})
                    effective = policy.model_copy(update={"spec": spec})
                entry = (policy, samples, est, effective)
            cache[key] = entry
            estimates[ref] = entry[2]
            out.append(entry[3])
        self._cache = cache
        if self._kept:  # workloads without a policy any more lose their kept times
            refs = {p.workload for p in policies}
            self._kept = {ref: kept for ref, kept in self._kept.items() if ref in refs}
        return out, estimates


def startup_notes(estimates: Mapping[WorkloadRef, StartupEstimate]) -> tuple[str, ...]:
    """One note per workload planned with a start-up delay other than its configured one."""
    return tuple(f"{ref}: {e.sentence}" for ref, e in estimates.items() if e.seconds != e.configured_seconds)


class CalibrationBook:
    """Per group of functions, the invocation forecaster's recurrence calibration, refitted once an hour.

    The hazard is refitted each cycle on the last day (cheap); fitting the calibration means
    replaying the day step by step (about 2 s for 1,000 functions, ``scaleahead bench speed``), so
    it is done once per budget period (``planner.warm_budget.budget_period``: an hour at 1-minute
    steps) and a group's coefficients are reused until the next one; the warm-memory budget's
    hourly replay of the same functions is handed them too (``current``) when they were fitted on
    the day before the period's start, the day the replay runs on. Nothing here survives a restart,
    nor needs to: the first cycle refits.
    """

    def __init__(self) -> None:
        # (step, functions) -> (period, coefficients or None, the plan note saying which and why,
        # whether they were fitted in the period's first step: on the day before its start)
        self._cache: dict[tuple[float, tuple[WorkloadRef, ...]], tuple[int, np.ndarray | None, str, bool]] = {}

    def model(
        self, refs: Sequence[WorkloadRef], counts: np.ndarray, now: float, step: float, horizon: int
    ) -> InvocationForecaster:
        """A forecaster fitted on ``counts`` with this period's calibration of the group ``refs``."""
        key = (step, tuple(refs))
        period = budget_period(now, step)
        hit = self._cache.get(key)
        if hit is not None and hit[0] == period:
            coef = hit[1]
            return InvocationForecaster(
                len(refs), step_s=step, horizon=horizon, calibrate=coef is not None, calibration=coef
            ).fit(counts)
        model = InvocationForecaster(len(refs), step_s=step, horizon=horizon).fit(counts)
        # Groups gone stay gone; a group is compared with its own step's period (period numbers of
        # different steps differ: comparing them with this one's evicted every other step's groups).
        self._cache = {k: v for k, v in self._cache.items() if v[0] == budget_period(now, k[0])}
        first_step = math.floor(now / step + 1e-9) == period * RECALIBRATE_STEPS
        self._cache[key] = (period, model.calibration, _calibration_note(len(refs), step, model), first_step)
        return model

    def notes(self, now: float) -> tuple[str, ...]:
        """One sentence per group calibrated in the period ``now`` falls in: in use or not, and why."""
        return tuple(note for key, (period, _, note, _) in self._cache.items() if period == budget_period(now, key[0]))

    def current(self, now: float) -> dict[tuple[float, tuple[WorkloadRef, ...]], np.ndarray | None]:
        """The calibrations fitted on the day before the start of the period ``now`` falls in (in its
        first step), by (step, functions): what the warm-memory budget's replay of that day may reuse.
        One fitted later in the period (a process started mid-period) is not: the replay fits its own."""
        return {
            key: coef
            for key, (period, coef, _, first) in self._cache.items()
            if first and period == budget_period(now, key[0])
        }


def _calibration_note(n: int, step: float, model: InvocationForecaster) -> str:
    head = f"invocation forecasts of {n} functions (step {step:g} s)"
    check = model.calibration_check
    if model.calibration is not None:
        held = (
            f" (newest hour held out: log-loss {check[1]:.4f} against the hazard's {check[0]:.4f})"
            if check is not None
            else ""
        )
        return f"{head}: recurrence calibration refitted on the last day this hour{held}"
    if check is not None:
        return (
            f"{head}: the idle-time hazard alone this hour; the recurrence calibration forecast the newest "
            f"hour worse (log-loss {check[1]:.4f} against the hazard's {check[0]:.4f})"
        )
    return (
        f"{head}: the idle-time hazard alone this hour; too few calls (or non-calls) in the last day to fit "
        "the recurrence calibration, or its fit did not converge"
    )


class RebalanceClock:
    """When the loop last planned with rebalancing moves: a plan may carry them in the first cycle of
    each ``loop.rebalance_interval_s`` period that reads the placement, at most once per period.

    Cycles are not exactly ``loop.interval_s`` apart (a late tick runs at once and the next stays on
    the grid; a failed one backs off), so ``now`` alone cannot tell a period's first cycle: deciding
    from ``floor(now / P) != floor((now - interval) / P)`` skipped a period after a back-off and
    moved twice, 5 s apart, after a late tick (found in review). So the last such cycle is kept.
    A process (or a replica that just became the leader: ``reset``) does not know whether the one
    before it moved pods in the period it starts in, so it moves none there: its first rebalance is
    in the next period, and a restart or a change of leader never moves twice in one.
    """

    def __init__(self) -> None:
        #: ``now`` of the last cycle planned with moves allowed, or of the first one seen (None: none yet).
        self.last_at: float | None = None

    def reset(self) -> None:
        """Forget the last rebalance (another leader may have moved pods since): as a new process."""
        self.last_at = None

    def due(self, now: float, period_s: float) -> bool:
        """Whether the plan at ``now`` may carry moves: a period after the last rebalance (or after the
        first cycle seen, which records ``now`` and says no)."""
        if self.last_at is None:
            self.last_at = now
            return False
        return math.floor(now / period_s) > math.floor(self.last_at / period_s)

    def done(self, now: float) -> None:
        """The plan at ``now`` was made with moves allowed (whether it found any)."""
        self.last_at = now


@dataclass
class Deps:
    history: HistorySource
    forecaster: Forecaster
    target: Target
    store: Store | None
    policies: Sequence[Policy]
    model_version_id: int | None = None
    #: The journaled, safety-checked actuator (``actuator.applying.Actuator``); without it the
    #: target is driven directly by ``actuator.base.apply_plan``.
    actuator: Actuator | None = None
    #: A running rollout (``RolloutBook.view``) and the challenger's forecaster: in canary and A/B
    #: the challenger's forecasts drive its share of workloads; in shadow it only plans (recorded
    #: as a ``shadow`` plan, never applied).
    rollout: RolloutView | None = None
    challenger: Forecaster | None = None
    #: Further running rollouts, one per other rollout group: ``(view, challenger)`` each, used
    #: like ``rollout``/``challenger`` for the workloads of its group (the daemon follows one per
    #: group here).
    trials: tuple[tuple[RolloutView, Forecaster], ...] = ()
    #: Learned start-up delays, cached across cycles (``StartupBook``).
    startup: StartupBook = field(default_factory=StartupBook)
    #: Warm-memory budgets of function groups, rebuilt once per period (``scaleahead.warm_budgets``).
    warm_budgets: WarmBudgetBook = field(default_factory=WarmBudgetBook)
    #: Invocation forecasters' recurrence calibrations, refitted once an hour (``CalibrationBook``).
    invocation_calibrations: CalibrationBook = field(default_factory=CalibrationBook)
    #: Per service, sloRisk adapted against an HPA simulated on the same demand (``planner.risk``).
    risk: RiskBook = field(default_factory=RiskBook)
    #: When the loop last planned with rebalancing moves (``RebalanceClock``; ``loop.max_moves``).
    rebalance: RebalanceClock = field(default_factory=RebalanceClock)
    #: Each workload's pods as last read, held against the shared limits while it cannot be read.
    unread: UnreadBook = field(default_factory=UnreadBook)
    #: What ``loop.capacity`` is a part of, for the reasons (``run --shard 1/3``: "shard 1/3's part
    #: of the "; ``planner.plan``'s ``capacity_scope``); "" when it is the whole.
    capacity_scope: str = ""


def _on_arm(action: Action, arms: Mapping[WorkloadRef, tuple[str, str, int | None]]) -> Action:
    """``action`` with its rollout arm, model and version in its reason's details (``arm``,
    ``model``, ``model_version``) when a challenger's forecast decided it (loop reasons audit: a
    canary's or A/B test's challenger rows read like the champion's in the journal)."""
    if isinstance(action, MovePod) or (on := arms.get(action.workload)) is None:
        return action
    arm, model, version = on
    extra: dict[str, float | int | str] = {"arm": arm, "model": model}
    if version is not None:
        extra["model_version"] = version
    r = action.reason
    return replace(action, reason=Reason(r.code, r.message, {**r.details, **extra}))


@dataclass
class CycleReport:
    now: float
    plan: Plan
    forecasts: dict[WorkloadRef, Forecast]
    results: list[ActionResult]
    phase_ms: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    plan_id: int | None = None
    shadow_plan: Plan | None = None
    #: Per workload with readiness samples: the start-up delay planned with and why.
    startup: dict[WorkloadRef, StartupEstimate] = field(default_factory=dict)
    #: Per service with risk adaptation: the objective.sloRisk planned with this cycle (``planner.risk``).
    slo_risk: dict[WorkloadRef, float] = field(default_factory=dict)
    #: The model version of each forecast that is not production's (``Deps.model_version_id``): a
    #: rollout's challenger arm (``RolloutView.challenger_version``).
    versions: dict[WorkloadRef, int | None] = field(default_factory=dict)
    #: A shadow rollout's challenger forecasts (planned with, never acted on): scored for its outcomes.
    shadow_forecasts: dict[WorkloadRef, Forecast] = field(default_factory=dict)


class _Timer:
    def __init__(self, report: dict[str, float]) -> None:
        self.report = report

    def phase(self, name: str) -> _Phase:
        return _Phase(self.report, name)


class _Phase:
    def __init__(self, report: dict[str, float], name: str) -> None:
        self.report, self.name = report, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:  # a phase entered twice (one per rollout) adds up
        self.report[self.name] = self.report.get(self.name, 0.0) + (time.perf_counter() - self.t0) * 1000.0


def observed_state(
    state: ClusterState,
    history: Mapping[WorkloadRef, Series],
    windows: Mapping[WorkloadRef, float] | None = None,
    ramps: Mapping[WorkloadRef, float] | None = None,
    keep_alive: Mapping[WorkloadRef, float] | None = None,
) -> ClusterState:
    """Attach the observed demand (from history) to each workload's state.

    The demand is the mean over the workload's ``observedWindowSeconds`` (``windows``; the last sample
    alone when absent) ending at its last finite sample, and its trend the line fitted over the
    workload's ``rampFloor.windowSeconds`` (``ramps``; none when absent or 0) ending there
    (scaleahead/observed.py). A function with a warm pool (in ``keep_alive``: its
    ``warmPool.keepAliveSeconds``) also gets its last call within that keep-alive (``last_active_at``).
    """
    workloads: dict[WorkloadRef, WorkloadState] = dict(state.workloads)
    seen_at: list[tuple[WorkloadRef, WorkloadState, Series, tuple[float, float]]] = []
    for ref, ws in state.workloads.items():
        series = history.get(ref)
        if series is None or len(series) == 0:
            continue
        seen = observed_demand(series, (windows or {}).get(ref, 0.0))
        if seen is not None:
            seen_at.append((ref, ws, series, seen))
    # Every trend in one least-squares pass per window length.
    trends = demand_trends([(series, (ramps or {}).get(ref, 0.0)) for ref, _, series, _ in seen_at])
    for (ref, ws, series, seen), trend in zip(seen_at, trends, strict=True):
        lookback = (keep_alive or {}).get(ref)
        workloads[ref] = WorkloadState(
            ref,
            ws.replicas,
            ws.ready_replicas,
            seen[0],
            seen[1],
            ws.warm_instances,
            ws.recent_desired,
            ws.startup_samples,
            trend,
            last_active_at(series, lookback) if lookback is not None else math.nan,
            ws.startup_pods,
        )
    return replace(state, workloads=workloads)


#: History the invocation forecaster sees each cycle: one day, enough for daily timers.
INVOCATION_WINDOW_S = 86400.0


def invocation_forecasts(
    policies: Sequence[Policy],
    history: Mapping[WorkloadRef, Series],
    now: float,
    horizon_s: float,
    calibrations: CalibrationBook | None = None,
) -> dict[WorkloadRef, InvocationForecast]:
    """Invocation-probability forecasts for the functions with a warm pool (docs/serverless.md).

    The idle-time hazard model is refitted each cycle on the last day of each function's history
    strictly before ``now`` (functions of one step size together); its recurrence calibration is
    fitted on the same day, once an hour when ``calibrations`` keeps it across cycles (else every
    call). A missing step counts as no invocation, the model's own convention; a function without
    history gets no forecast and its policy's fallback. Each forecast's ``data_until`` is the end of
    the function's newest finite sample, so a history that stopped is stale for the planner
    (``fallback.staleAfterSeconds``), not a function idle since.
    """
    refs = [
        p.workload
        for p in policies
        if p.spec.workload_class == WorkloadClass.FUNCTION and p.spec.warm_pool.enabled and p.workload in history
    ]
    by_step: dict[float, list[tuple[WorkloadRef, Series]]] = {}
    for ref in refs:
        past = history[ref].known_by(now)  # the steps ended by now
        if len(past) and np.isfinite(past.values).any():
            by_step.setdefault(past.step_s, []).append((ref, past))
    out: dict[WorkloadRef, InvocationForecast] = {}
    book = calibrations if calibrations is not None else CalibrationBook()
    for step, group in by_step.items():
        counts = aligned_counts([past for _, past in group], now, step, INVOCATION_WINDOW_S)
        horizon = max(1, int(round(horizon_s / step)))
        model = book.model([ref for ref, _ in group], counts, now, step, horizon)
        made = model.forecasts([ref for ref, _ in group], now)
        for ref, past in group:
            newest = last_finite(past.values)
            out[ref] = replace(made[ref], data_until=past.start + (newest + 1) * past.step_s)
    return out


def forecast_batched(
    forecaster: Forecaster,
    items: Sequence[tuple[WorkloadRef, Series]],
    now: float,
    steps: int,
    forecasts: dict[WorkloadRef, Forecast],
    errors: dict[str, str],
) -> int:
    """Forecast ``items`` in as few ``forecast_many`` calls as their failures allow; returns the calls.

    One call for the whole batch. If it raises, the batch is split in halves and each half tried
    again, down to single workloads, whose error is recorded under their key (they go to their
    policy's fallback). So k bad series among n cost about 2 k log2(n) batched calls, never n
    one-by-one forecasts: one bad series must not turn a 150 ms batch into seconds of single calls.
    """
    try:
        for fc in forecaster.forecast_many(items, now, steps):
            forecasts[fc.workload] = fc
        return 1
    except Exception as exc:  # noqa: BLE001 - bad series are isolated below, the rest stay batched
        if len(items) == 1:
            errors[items[0][0].key] = f"forecast: {exc}"
            return 1
        errors.setdefault("forecast", f"batch failed, split to isolate the failing series: {exc}")
        mid = len(items) // 2
        return (
            1
            + forecast_batched(forecaster, items[:mid], now, steps, forecasts, errors)
            + forecast_batched(forecaster, items[mid:], now, steps, forecasts, errors)
        )


def forecast_by_step(
    forecaster: Forecaster,
    items: Sequence[tuple[WorkloadRef, Series]],
    now: float,
    horizon_s: float,
    forecasts: dict[WorkloadRef, Forecast],
    errors: dict[str, str],
) -> int:
    """``forecast_batched`` per step size: each series forecast ``horizon_s`` ahead in its own steps
    (a 60 s series 15 steps, a 10 s one 90), one batch per step size; returns the calls."""
    groups: dict[float, list[tuple[WorkloadRef, Series]]] = {}
    for item in items:
        groups.setdefault(item[1].step_s, []).append(item)
    return sum(
        forecast_batched(forecaster, group, now, horizon_steps_for(step, horizon_s), forecasts, errors)
        for step, group in groups.items()
    )


#: How far back a pod's placement peak looks in its workload's demand (s). A move outlasts the
#: forecast's 15 minutes (the pod stays where it was put), so it must hold at the day's peak too:
#: with the 15-minute peak alone the default overcommitted on 4 of 8 seeds of ``bench rebalance``
#: (docs/benchmarks.md, "Rebalancing with the loop's peaks").
PLACEMENT_LOOKBACK_S = 86400.0


def with_forecast_peaks_of(
    state: ClusterState,
    forecasts: Mapping[WorkloadRef, Forecast],
    history: Mapping[WorkloadRef, Series] | None = None,
    lookback_s: float = PLACEMENT_LOOKBACK_S,
) -> ClusterState:
    """The state with each pod's CPU peak from its workload's demand: the larger of the p90 peak
    over the forecast horizon and the highest demand of the last ``lookback_s`` of ``history``,
    over the demand observed now (``planner.rebalance.with_forecast_peaks``)."""
    ratios: dict[tuple[str, str], float] = {}
    for ref, fc in forecasts.items():
        ws = state.workloads.get(ref)
        if ws is None or not math.isfinite(ws.observed_demand) or ws.observed_demand <= 0:
            continue
        p90 = fc.quantile(0.9)
        peak = float(np.nanmax(p90)) if len(p90) and np.isfinite(p90).any() else math.nan
        past = history.get(ref) if history is not None else None
        if past is not None and len(past):
            tail = past.values[-max(1, int(round(lookback_s / past.step_s))) :]
            seen = tail[np.isfinite(tail)]
            if seen.size:
                peak = max(peak, float(seen.max())) if math.isfinite(peak) else float(seen.max())
        if math.isfinite(peak):
            ratios[ref.namespace, ref.name] = peak / ws.observed_demand
    return replace(state, pods=with_forecast_peaks(state.pods, ratios))


def run_once(deps: Deps, settings: Settings, now: float, dry_run: bool | None = None) -> CycleReport:
    """One control cycle at time ``now`` (virtual or real). Never reads the clock for decisions."""
    phases: dict[str, float] = {}
    timer = _Timer(phases)
    errors: dict[str, str] = {}
    # The planner's own refs (kept while the policies are): state and forecasts keyed by the very
    # objects the planner looks them up with find them by identity, without WorkloadRef.__eq__.
    refs = list(policy_table(deps.policies).refs)
    with timer.phase("history"):
        try:
            # A sample beyond float32 (a 1e42 glitch) is missing everywhere the cycle reads history:
            # the forecasters, the observed demand and its trend, warm pools and rebalancing peaks.
            history = {ref: without_glitches(s) for ref, s in deps.history.read(deps.policies, now).items()}
        except Exception as exc:  # noqa: BLE001 - the planner falls back per policy
            log.warning("history read failed: %s", exc, extra={"event": "history_read_failed"})
            errors["history"] = str(exc)
            history = {}
        else:
            # A source that reads per workload (Prometheus) keeps the failed ones' reasons: report them.
            for ref, msg in (getattr(deps.history, "errors", None) or {}).items():
                if ref not in history:
                    errors[getattr(ref, "key", str(ref))] = f"history: {msg}"
    with timer.phase("forecast"):
        forecasts: dict[WorkloadRef, Forecast] = {}
        items = []
        item_policies: list[Policy] = []
        for ref, pol in zip(refs, policy_table(deps.policies).policies, strict=True):
            if ref not in history or (pol.spec.workload_class == WorkloadClass.FUNCTION and pol.spec.warm_pool.enabled):
                continue  # a warm-pool function is planned from its invocation forecast (below)
            if not np.isfinite(history[ref].known_by(now).values).any():
                # No usable value: one such workload must not send the whole batch one by one.
                errors[ref.key] = "forecast: no usable history before now"
                continue
            items.append((ref, history[ref]))
            item_policies.append(pol)
        if items and getattr(deps.forecaster, "needs_fit", False):  # duck-typed wrappers have none
            # A baseline started without history (Prometheus down at start-up): fit it on the first
            # history there is, the steps ended by now. If that is still too short, the forecasts fail
            # below with the reason and the policies' fallbacks apply; the next cycle tries again.
            try:
                deps.forecaster.fit([s.known_by(now) for _, s in items])
            except Exception as exc:  # noqa: BLE001 - unfitted: no forecasts, the fallbacks apply
                log.warning("fitting %s on this cycle's history failed: %s", deps.forecaster.name, exc)
                errors["forecast_fit"] = f"fitting {deps.forecaster.name} on this cycle's history failed: {exc}"
            else:
                done = not deps.forecaster.needs_fit
                log.info(
                    "fitted %s on this cycle's history (it had none at start-up)"
                    if done
                    else "%s: still too little history to fit it; the policies' fallbacks apply",
                    deps.forecaster.name,
                    extra={"event": "model_fitted" if done else "model_unfitted", "model": deps.forecaster.name},
                )
        if items and "forecast_fit" not in errors:  # an unfitted model would fail every series, one by one
            forecast_by_step(deps.forecaster, items, now, settings.forecast.horizon_s, forecasts, errors)
    shadow: dict[WorkloadRef, Forecast] = {}
    shadow_versions: set[int | None] = set()  # the shadow challengers' model versions
    versions: dict[WorkloadRef, int | None] = {}  # forecasts not made by production's version
    arms: dict[WorkloadRef, tuple[str, str, int | None]] = {}  # (arm, model, version) of those
    running = [(deps.rollout, deps.challenger)] if deps.rollout is not None and deps.challenger is not None else []
    running += list(deps.trials)
    for rollout, model in running:
        # Only the workloads of the rollout's group take part (spec.rolloutGroup).
        members = [
            (ref, s) for (ref, s), p in zip(items, item_policies, strict=True) if rollout.covers(p.spec.rollout_group)
        ]
        if not members:
            continue
        challenger: dict[WorkloadRef, Forecast] = {}
        with timer.phase("challenger"):
            # batched like the champion's; where it fails, the champion's forecast stays
            challenger_errors: dict[str, str] = {}
            forecast_by_step(model, members, now, settings.forecast.horizon_s, challenger, challenger_errors)
            errors.update({f"challenger:{key}": why for key, why in challenger_errors.items()})
        if rollout.mode == "shadow":
            shadow.update(challenger)
            if challenger:
                shadow_versions.add(rollout.challenger_version)
            continue
        for ref, fc in challenger.items():
            if rollout.arm(ref.key) == "challenger":
                forecasts[ref] = fc
                versions[ref] = rollout.challenger_version
                arms[ref] = (f"{rollout.mode} challenger", model.name, rollout.challenger_version)
    with timer.phase("invocations"):
        try:
            invocations = invocation_forecasts(
                deps.policies, history, now, settings.forecast.horizon_s, deps.invocation_calibrations
            )
        except Exception as exc:  # noqa: BLE001 - warm pools fall back by their policy
            errors["invocations"] = str(exc)
            invocations = {}
    with timer.phase("state"):
        windows = {p.workload: p.spec.observed_window_seconds for p in deps.policies}
        ramps = {p.workload: p.spec.ramp_floor.window_seconds for p in deps.policies}
        keep_alive = {
            p.workload: p.spec.warm_pool.keep_alive_seconds
            for p in deps.policies
            if p.spec.workload_class == WorkloadClass.FUNCTION and p.spec.warm_pool.enabled
        }
        state = observed_state(deps.target.read_state(refs), history, windows, ramps, keep_alive)
        # A workload whose object the target could not read is an error at stage "state" and is not
        # planned this cycle: planning it from no state would invent its current count.
        unread = state.unreadable
        for ref, why in unread.items():
            errors[ref.key] = f"state: {why}"
        if settings.loop.capacity or settings.loop.warm_memory_budget_mb is not None:
            deps.unread.update(state, refs, now)  # only shared limits need the last reads
    with timer.phase("startup"):
        policies, startup = deps.startup.apply(deps.policies, state)
    budget_notes: tuple[str, ...] = ()
    with timer.phase("warm_budget"):
        try:
            policies, budget_notes = deps.warm_budgets.apply(
                policies, history, now, deps.invocation_calibrations.current(now)
            )
        except Exception as exc:  # noqa: BLE001 - the policies' own costs stay
            errors["warm_budget"] = str(exc)
        else:  # a group whose rebuild failed keeps its policies' costs; the others have their budgets
            if deps.warm_budgets.errors:
                errors["warm_budget"] = "; ".join(f"{head}: {why}" for head, why in deps.warm_budgets.errors.items())
    risk_notes: tuple[str, ...] = ()
    slo_risk: dict[WorkloadRef, float] = {}
    with timer.phase("risk"):
        try:
            if deps.store is not None and not deps.risk.restored:
                # resume where the last process (or leader) left off
                deps.risk.restore(deps.store.risk_factor_records())
            policies, risk_notes = deps.risk.apply(policies, history, state, now, settings.loop.interval_s)
            slo_risk = {p.workload: p.spec.objective.slo_risk for p in policies if adapts(p)}
            if deps.store is not None and deps.risk.unsaved:  # a failed write is retried next cycle
                deps.store.set_risk_factors(dict(deps.risk.unsaved), now)
                deps.risk.unsaved.clear()
        except Exception as exc:  # noqa: BLE001 - the policies' own sloRisk stays
            log.warning("risk adaptation failed: %s", exc, extra={"event": "risk_adaptation_failed"})
            errors["risk"] = str(exc)
    with timer.phase("plan"):
        # The unreadable workloads' pods still run: they keep their share of the shared limits.
        held = deps.unread.hold(policies, unread, settings.loop.capacity, settings.loop.warm_memory_budget_mb)
        if unread:
            policies = [p for p in policies if p.workload not in unread]
        moves = 0
        if settings.loop.max_moves > 0 and state.nodes and deps.rebalance.due(now, settings.loop.rebalance_interval_s):
            moves = settings.loop.max_moves
        plan = make_plan(
            forecasts,
            with_forecast_peaks_of(state, forecasts, history) if moves else state,
            policies,
            now,
            interval_s=settings.loop.interval_s,
            max_moves=moves,
            invocations=invocations,
            capacity=held.capacity,
            warm_memory_budget_mb=held.warm_memory_budget_mb,
            capacity_scope=deps.capacity_scope,
            warm_memory_held_mb=held.warm_memory_held_mb,
            rebalance_weights=RebalanceWeights(
                node_freed=settings.loop.rebalance_node_freed,
                pair_separated=settings.loop.rebalance_pair_separated,
                move_cost=settings.loop.rebalance_move_cost,
            ),
            max_peak_fraction=settings.loop.rebalance_max_peak_fraction,
        )
        if arms:  # a decision made from a challenger's forecast says so in its journaled details
            plan = Plan(plan.created_at, tuple(_on_arm(a, arms) for a in plan.actions), plan.fallbacks, plan.notes)
        if moves:
            deps.rebalance.done(now)
        learned = (
            startup_notes(startup) + deps.invocation_calibrations.notes(now) + budget_notes + risk_notes + held.notes
        )
        if learned:
            plan = Plan(plan.created_at, plan.actions, plan.fallbacks, plan.notes + learned)
        shadow_plan = None
        if shadow:
            shadow_plan = make_plan(
                {**forecasts, **shadow},
                state,
                policies,
                now,
                interval_s=settings.loop.interval_s,
                invocations=invocations,  # without them every warm pool was in fallback in the shadow plan
                capacity=held.capacity,
                warm_memory_budget_mb=held.warm_memory_budget_mb,
                capacity_scope=deps.capacity_scope,
                warm_memory_held_mb=held.warm_memory_held_mb,
            )
            # Journaled: the challenger's changes only, for the workloads it forecast, under source
            # "shadow" with a note naming its version (loop reasons audit: every workload's plan,
            # no-ops included, read as plain dry-run rows of no model).
            mine = tuple(a for a in shadow_plan.changes if not isinstance(a, MovePod) and a.workload in shadow)
            if deps.store is not None and mine:
                named = ", ".join(str(v) for v in sorted(v for v in shadow_versions if v is not None)) or "unregistered"
                note = f"shadow rollout: the challenger's plan (model version {named}); never applied"
                fallbacks = {ref: mode for ref, mode in shadow_plan.fallbacks.items() if ref in shadow}
                deps.store.record_plan(
                    Plan(shadow_plan.created_at, mine, fallbacks, (note,)), source="shadow", state="dry-run"
                )
    plan_id = None
    action_ids: list[int] = []
    with timer.phase("record"):
        if deps.store is not None:
            deps.store.record_forecasts(
                list(forecasts.values()),
                deps.model_version_id,
                versions={ref: versions[ref] for ref in versions if ref in forecasts},
            )
            if plan.changes or plan.fallbacks:
                plan_id, action_ids = deps.store.record_plan(
                    Plan(plan.created_at, plan.changes, plan.fallbacks, plan.notes), source="loop"
                )
    with timer.phase("act"):
        dry = settings.actuation.dry_run if dry_run is None else dry_run
        if settings.actuation.paused:
            dry = True
        if deps.actuator is not None:
            # plan.created_at is this cycle's now, when its history was read: the actuator ages the
            # plan from there on its own clock as it checks each action (actuation.max_plan_age_s).
            results = deps.actuator.apply_plan(plan, now, dry_run=dry, action_ids=action_ids if deps.store else None)
            deps.unread.wrote(results, policies, now)
            return CycleReport(
                now, plan, forecasts, results, phases, errors, plan_id, shadow_plan, startup, slo_risk, versions, shadow
            )
        results = apply_plan(plan, deps.target, dry_run=dry)
        deps.unread.wrote(results, policies, now)
    with timer.phase("journal"):
        if deps.store is not None and action_ids:
            changed = [r for r in results if not r.action.is_noop]
            updates = [(aid, res.outcome, res.detail) for aid, res in zip(action_ids, changed, strict=True)]
            deps.store.set_action_states(updates, now)
    return CycleReport(
        now, plan, forecasts, results, phases, errors, plan_id, shadow_plan, startup, slo_risk, versions, shadow
    )


def run_forever(
    deps: Deps,
    settings: Settings,
    clock: Clock,
    stop: Callable[[], bool],
    on_cycle: Callable[[CycleReport, float], None] | None = None,
) -> None:
    """Tick every ``settings.loop.interval_s``; record lateness; back off after failed cycles."""
    interval = settings.loop.interval_s
    next_tick = clock.now()
    backoff = 0.0
    if deps.actuator is not None:  # a crash may have left journaled actions 'planned'
        for aid, state, why in deps.actuator.reconcile(next_tick):
            if state == "planned":  # the object cannot be read now: reconciled again on the next start
                log.warning("journal: action %d stays planned: %s; reconciled again on the next start", aid, why)
            else:
                log.info("journal: action %d -> %s: %s", aid, state, why)
    while not stop():
        now = clock.now()
        lateness = max(0.0, now - next_tick)
        try:
            report = run_once(deps, settings, now)
            backoff = 0.0
            if on_cycle is not None:
                on_cycle(report, lateness)
        except Exception:  # noqa: BLE001 - the daemon must keep going
            log.exception("cycle failed")
            backoff = min(settings.loop.max_backoff_s, max(interval, backoff * 2))
        next_tick += interval + backoff
        now = clock.now()
        if next_tick < now:  # a late cycle: skip the ticks it missed instead of running them back to back
            next_tick += math.ceil((now - next_tick) / interval) * interval
        elif next_tick - now > interval + backoff:
            # The wall clock stepped back (NTP): waiting for the old schedule would stop the loop
            # for as long as the step. One interval (and back-off) from now, on the new clock.
            next_tick = now + interval + backoff
        clock.sleep(max(0.0, next_tick - now))
