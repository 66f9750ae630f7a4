"""The in-cluster daemon behind ``scaleahead run``: the control loop plus its scheduled jobs.

Every ``settings.loop.interval_s`` the leader runs one ``scaleahead.loop.run_once`` cycle over the
workloads that are not backing off, then updates metrics, the live forecast error and the
policies' status, and runs the scheduled jobs that are due. Jobs are timed by APScheduler's
triggers (cron expressions) evaluated on the loop's own clock, so a virtual clock drives the
whole daemon in tests; in production they run on one worker thread so a long retraining never
delays a tick.

- Per-workload back-off: a workload whose history, forecast, state (its object could not be read:
  not planned that cycle) or action failed is not read, forecast or acted on for
  ``interval * 2^(n-1)`` seconds (at least the ``Retry-After`` a throttling API server's 429
  asked for; capped at ``loop.max_backoff_s``) after its n-th consecutive failure; meanwhile the
  planner's named fallback is reported for it and the other workloads go on. A whole failed
  cycle backs the loop off the same way.
- Jobs: ``retrain`` (on ``jobs.retrain_cron`` and when the live error drifts past
  ``jobs.drift_threshold``; the new model enters as a rollout challenger), ``accuracy_report``
  (daily JSON) and ``prune`` (old forecasts and plans).
- Leadership: only the leader acts and runs jobs; a standby replica serves metrics and waits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.exc import InterfaceError, OperationalError

from actuator.applying import parse_intent
from actuator.base import ActionResult, Target
from actuator.safety import desired_value
from forecaster.invocations import InvocationForecaster
from forecaster.registry import LEARNED
from scaleahead.clock import Clock
from scaleahead.commands import check_folder
from scaleahead.errors import ConfigError, DataError, UserError
from scaleahead.loop import CycleReport, Deps, HistorySource, run_once
from scaleahead.observability import Health, Metrics
from scaleahead.outcomes import ArmOf, OutcomeBook
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.retraining import (
    RetrainResult,
    load_model_version,
    read_problems,
    retrain,
    retrained_family,
    writes_checkpoint,
)
from scaleahead.settings import Settings
from scaleahead.types import (
    F32_MAX,
    Action,
    ClusterState,
    Forecast,
    ScaleTo,
    Series,
    SetWarmPool,
    WorkloadRef,
    WorkloadState,
)

if TYPE_CHECKING:
    from actuator.rollouts import RolloutView
    from forecaster.base import Forecaster
    from storage.store import ManagedField

log = logging.getLogger("scaleahead.daemon")


# -- collaborators ---------------------------------------------------------------------------------
class Leadership(Protocol):
    """Leader election (a coordination.k8s.io Lease in cluster): only the leader acts.

    An election may also have ``holds_now() -> bool``: whether the Lease is still held as of its
    last renewal, with no API call (asked off the tick's thread, by a job before it writes).
    """

    def is_leader(self, now: float) -> bool:
        """Acquire or renew as needed; True while this replica may act."""
        ...

    def release(self) -> None: ...


class AlwaysLeader:
    """A single replica is always the leader."""

    def is_leader(self, now: float) -> bool:
        return True

    def release(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    """What the ``PredictiveScalingPolicy`` status subresource shows after a cycle.

    A service's status has its replicas; a function with a warm pool its warm instances (the
    replicas None), since the warm pool is what scaleahead sets for it.
    """

    name: str
    namespace: str
    workload: str
    desired_replicas: int | None
    current_replicas: int | None
    forecast_peak: float | None
    fallback_mode: str
    last_reason: str
    last_reason_code: str
    updated_at: float
    model: str
    desired_warm_instances: int | None = None
    current_warm_instances: int | None = None

    def to_status(self) -> dict[str, Any]:
        """The camelCase status object of the CRD (``deploy/base/crd.yaml``); a null field is removed
        by the merge patch (a policy that turned from a function into a service loses its warm counts)."""
        doc: dict[str, Any] = {
            "desiredReplicas": self.desired_replicas,
            "currentReplicas": self.current_replicas,
            "desiredWarmInstances": self.desired_warm_instances,
            "currentWarmInstances": self.current_warm_instances,
            "fallbackMode": self.fallback_mode,
            "lastReason": self.last_reason,
            "lastReasonCode": self.last_reason_code,
            "lastUpdateTime": datetime.fromtimestamp(self.updated_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "model": self.model,
        }
        # null (a merge patch removes it) when this decision had no forecast: not the last one's peak
        doc["forecastPeak"] = round(self.forecast_peak, 6) if self.forecast_peak is not None else None
        return doc


#: The status's ``lastReasonCode`` when the plan's change was not applied this cycle (docs/operations.md,
#: "Policy status"): the workload ``backing_off`` after errors, actuation ``paused`` (kill switch),
#: a ``dry_run``, a ``human_edit`` respected, a persistent ``co_writer`` left alone, another skip
#: (``action_skipped``: a safety check, a refused write, the Lease lost) or a failed write
#: (``action_failed``). ``lastReason`` then says why, and ends with what the plan wanted.
#: ``action_limited``: applied, or already in place, but at another value than planned (the actuator's
#: limits from the live object or the cluster: a step limit from the live value, the HPA's
#: ``maxReplicas`` in floor mode, a ResourceQuota).
NOT_APPLIED = (
    "backing_off",
    "paused",
    "dry_run",
    "human_edit",
    "co_writer",
    "action_skipped",
    "action_failed",
    "action_limited",
)


#: The model a function's status names: its warm pool is planned from the invocation forecaster
#: (``forecaster.invocations``), not from the demand forecaster.
WARM_POOL_MODEL = InvocationForecaster.name


class StatusSink(Protocol):
    """Where policy statuses go (the CRs' status subresource in cluster)."""

    def publish(self, statuses: Sequence[PolicyStatus]) -> None: ...


# -- per-workload back-off -------------------------------------------------------------------------
@dataclass
class Backoff:
    """Consecutive failures per workload key, and until when each sits out."""

    interval_s: float
    max_s: float
    failures: dict[str, int] = field(default_factory=dict)
    until: dict[str, float] = field(default_factory=dict)

    def failed(self, key: str, now: float, at_least: float = 0.0) -> float:
        """Count a failure of ``key`` and return how long it sits out: ``interval * 2^(n-1)``, at
        least ``at_least`` (the wait a throttling API server asked for), never more than ``max_s``."""
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        wait = min(self.max_s, max(self.interval_s * 2.0 ** (n - 1), at_least))
        self.until[key] = now + wait
        return wait

    def succeeded(self, key: str) -> None:
        self.failures.pop(key, None)
        self.until.pop(key, None)

    def _until(self, key: str, now: float) -> float:
        """When ``key``'s back-off ends; never more than ``max_s`` after ``now``, so a wall clock
        stepped back (NTP) does not stretch a back-off by the size of the step."""
        until = self.until.get(key, -math.inf)
        if until - now > self.max_s:
            until = self.until[key] = now + self.max_s
        return until

    def blocked(self, key: str, now: float) -> bool:
        return self._until(key, now) > now

    def remaining(self, key: str, now: float) -> float:
        return max(0.0, self._until(key, now) - now) if key in self.until else 0.0


# -- live forecast error ---------------------------------------------------------------------------
@dataclass
class _Pending:
    origin: float
    step_s: float
    median: np.ndarray
    q90: np.ndarray
    version: int | None = None  # the model version that made it (None: not a registered one)
    #: The rollout and arm that made it (``scaleahead.outcomes.ArmOf``), for the measured outcomes.
    arm: tuple[int, str, int | None] | None = None


@dataclass
class _Daily:
    abs_err: float = 0.0
    actual: float = 0.0
    under_q90: int = 0
    scored: int = 0
    forecasts: int = 0
    #: Forecasts scored per model version that made them (a rollout or a promotion mixes them).
    versions: dict[int | None, int] = field(default_factory=dict)

    def add(self, other: _Daily) -> None:
        """Count ``other``'s scores in too."""
        self.abs_err += other.abs_err
        self.actual += other.actual
        self.under_q90 += other.under_q90
        self.scored += other.scored
        self.forecasts += other.forecasts
        for v, n in other.versions.items():
            self.versions[v] = self.versions.get(v, 0) + n


class LiveError:
    """Scores forecasts against the demand observed later: WAPE of the median per workload.

    One forecast per workload per ``sample_interval_s`` is kept; once its horizon has passed and
    the history covers it, it is scored and dropped. The per-workload error is an exponentially
    weighted mean (``alpha`` per matured forecast), the overall error the median over workloads.
    """

    def __init__(self, sample_interval_s: float = 300.0, alpha: float = 0.2, report: bool = True) -> None:
        self.sample_interval_s = sample_interval_s
        #: Whether to keep the accuracy report's counts (``daily``, ``_forgotten``); a shadow
        #: challenger's scorer only feeds the measured outcomes (``on_score``).
        self.report = report
        self.alpha = alpha
        self.pending: dict[WorkloadRef, list[_Pending]] = {}
        self.last_sample: dict[WorkloadRef, float] = {}
        self.error: dict[WorkloadRef, float] = {}
        self.matured = 0
        self.daily: dict[WorkloadRef, _Daily] = {}
        self.daily_lock = threading.Lock()
        #: Workload keys forgotten while a report's counts are out (``daily_taken``): not put back.
        self._forgotten: set[str] = set()
        #: Called with each scored forecast: ``(workload key, origin, arm, absolute error, actual)``
        #: (the daemon's ``OutcomeBook.score``), for forecasts observed with an arm.
        self.on_score: Callable[[str, float, tuple[int, str, int | None], float, float], None] | None = None

    def rebase(self, now: float) -> None:
        """The wall clock stepped back to ``now``: a workload last sampled after it is sampled
        again from ``now`` on, not once the clock has caught up with the step."""
        for ref, t in list(self.last_sample.items()):
            if t > now:
                self.last_sample[ref] = now - self.sample_interval_s

    def forget(self, keys: set[str]) -> None:
        """Drop everything kept for the workloads ``keys`` (their policies were removed)."""
        with self.daily_lock:
            if self.report:
                self._forgotten |= keys
            tables: tuple[dict[WorkloadRef, Any], ...] = (self.pending, self.last_sample, self.error, self.daily)
            for table in tables:
                for ref in [r for r in table if r.key in keys]:
                    del table[ref]

    def observe(
        self,
        forecasts: Mapping[WorkloadRef, Forecast],
        history: Mapping[WorkloadRef, Series],
        now: float,
        versions: Mapping[WorkloadRef, int | None] | None = None,
        arms: Mapping[WorkloadRef, tuple[int, str, int | None]] | None = None,
    ) -> None:
        """Keep a sample of ``forecasts`` (made by the model versions ``versions``, for the rollout
        arms ``arms``) and score those whose horizon ``history`` now covers."""
        for ref, fc in forecasts.items():
            last = self.last_sample.get(ref)
            if last is None or fc.origin - last >= self.sample_interval_s:
                self.last_sample[ref] = fc.origin
                self.pending.setdefault(ref, []).append(
                    _Pending(
                        fc.origin,
                        fc.step_s,
                        np.asarray(fc.quantile(0.5)),
                        np.asarray(fc.quantile(0.9)),
                        (versions or {}).get(ref),
                        (arms or {}).get(ref),
                    )
                )
        for ref, items in self.pending.items():
            series = history.get(ref)
            keep: list[_Pending] = []
            for p in items:
                end = p.origin + len(p.median) * p.step_s
                if end > now or series is None or series.end < end:
                    if now - end < 86400.0:  # drop what the history will never cover
                        keep.append(p)
                    continue
                actual = series.between(p.origin, end).values
                if len(actual) != len(p.median):
                    continue
                self._score(ref, p, actual)
            self.pending[ref] = keep

    def _score(self, ref: WorkloadRef, p: _Pending, actual: np.ndarray) -> None:
        # a sample beyond float32 (an exporter's 1e308 glitch) is missing, as for the forecasters
        ok = np.isfinite(actual) & (np.abs(actual) <= F32_MAX)
        if ok.sum() < max(1, len(actual) // 2):
            return
        err = float(np.abs(p.median[ok] - actual[ok]).sum())
        tot = float(np.abs(actual[ok]).sum())
        with self.daily_lock:  # the report job takes the day's counts on its own thread
            day = self.daily.setdefault(ref, _Daily()) if self.report else _Daily()
            day.abs_err += err
            day.actual += tot
            day.under_q90 += int((actual[ok] <= p.q90[ok]).sum())
            day.scored += int(ok.sum())
            day.forecasts += 1
            day.versions[p.version] = day.versions.get(p.version, 0) + 1
        if self.on_score is not None and p.arm is not None:
            self.on_score(ref.key, p.origin, p.arm, err, tot)
        if tot <= 0:
            return
        wape = err / tot
        prev = self.error.get(ref)
        self.error[ref] = wape if prev is None else (1 - self.alpha) * prev + self.alpha * wape
        self.matured += 1

    def overall(self) -> float:
        return statistics.median(self.error.values()) if self.error else float("nan")

    def reset_drift(self) -> None:
        """After a retraining: forget the error so drift is measured afresh."""
        self.error.clear()
        self.matured = 0

    def take_daily(self) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
        """The accumulated per-workload accuracy since the last call, then reset; and the forecasts
        scored per model version that made them, over all workloads."""
        with self.daily_taken() as out:
            return out

    @contextlib.contextmanager
    def daily_taken(self) -> Iterator[tuple[dict[str, dict[str, Any]], dict[str, int]]]:
        """``take_daily``'s numbers, reset only when the ``with`` block ends without an exception:
        when it raises (the report could not be written) they are put back, with the scores that
        landed meanwhile, so the next take covers the whole period."""
        with self.daily_lock:  # no score lands between the read and the reset
            daily, self.daily = self.daily, {}
            self._forgotten = set()
        try:
            yield self._summary(daily)
        except BaseException:
            with self.daily_lock:
                for ref, d in daily.items():
                    if ref.key in self._forgotten:  # its policy was removed meanwhile
                        continue
                    later = self.daily.get(ref)
                    if later is not None:
                        d.add(later)
                    self.daily[ref] = d
            raise

    @staticmethod
    def _summary(daily: Mapping[WorkloadRef, _Daily]) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
        out: dict[str, dict[str, Any]] = {}
        totals: dict[int | None, int] = {}
        for ref, d in sorted(daily.items()):
            out[ref.key] = {
                "forecasts": d.forecasts,
                "steps": d.scored,
                "mae": d.abs_err / d.scored if d.scored else None,
                "wape": d.abs_err / d.actual if d.actual > 0 else None,
                "coverage_q90": d.under_q90 / d.scored if d.scored else None,
                "forecasts_by_model_version": _by_version(d.versions),
            }
            for v, n in d.versions.items():
                totals[v] = totals.get(v, 0) + n
        return out, _by_version(totals)


def _by_version(counts: Mapping[int | None, int]) -> dict[str, int]:
    """Counts per model version, keyed by the version id (``none``: not a registered version)."""
    order = sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    return {("none" if v is None else str(v)): n for v, n in order}


# -- jobs on the loop's clock ----------------------------------------------------------------------
def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@dataclass
class Job:
    name: str
    trigger: BaseTrigger
    func: Callable[[float], object]
    next_fire: float | None = None
    runs: int = 0
    future: Future[object] | None = None


class Jobs:
    """APScheduler triggers evaluated at each tick of the loop's clock (virtual or real).

    Missed fire times (the process was down or busy) coalesce into one run, like APScheduler's
    ``coalesce=True``. A job still running when it is due again is skipped (``max_instances=1``).
    """

    def __init__(self, executor: ThreadPoolExecutor | None = None) -> None:
        self.jobs: dict[str, Job] = {}
        self.executor = executor

    def add(self, name: str, trigger: BaseTrigger, func: Callable[[float], object], now: float) -> Job:
        nxt = trigger.get_next_fire_time(None, _dt(now))
        job = Job(name, trigger, func, nxt.timestamp() if nxt is not None else None)
        self.jobs[name] = job
        return job

    def due(self, now: float) -> list[Job]:
        return [j for j in self.jobs.values() if j.next_fire is not None and j.next_fire <= now]

    def rebase(self, now: float) -> None:
        """The wall clock stepped back to ``now``: an interval job (the policy reload every 30 s)
        fires one interval from now, not a step's length later. A cron job keeps its next fire time,
        an absolute time the new clock still reaches (it would otherwise run twice)."""
        for job in self.jobs.values():
            if isinstance(job.trigger, IntervalTrigger):
                nxt = now + float(job.trigger.interval_length)
                if job.next_fire is None or nxt < job.next_fire:
                    job.next_fire = nxt

    def run_due(self, now: float, run: Callable[[Job, float], object]) -> list[str]:
        ran = []
        for job in self.due(now):
            prev = job.next_fire
            nxt = job.trigger.get_next_fire_time(_dt(prev) if prev is not None else None, _dt(now))
            while nxt is not None and nxt.timestamp() <= now:
                nxt = job.trigger.get_next_fire_time(nxt, _dt(now))
            job.next_fire = nxt.timestamp() if nxt is not None else None
            if job.future is not None and not job.future.done():
                log.warning("job %s still running; skipped", job.name, extra={"event": "job_skipped", "job": job.name})
                continue
            job.runs += 1
            ran.append(job.name)
            if self.executor is not None:
                job.future = self.executor.submit(run, job, now)
            else:
                run(job, now)
        return ran

    def submit_now(self, name: str, now: float, run: Callable[[Job, float], object]) -> bool:
        job = self.jobs[name]
        if job.future is not None and not job.future.done():
            return False
        job.runs += 1
        if self.executor is not None:
            job.future = self.executor.submit(run, job, now)
        else:
            run(job, now)
        return True


def cron(expr: str, what: str) -> BaseTrigger:
    """A UTC cron trigger with cron's meaning (``scaleahead.cronexpr``), or a ConfigError naming the setting."""
    from scaleahead.cronexpr import parse_cron

    try:
        return parse_cron(expr)
    except ValueError as exc:
        raise ConfigError(
            f"{what} {expr!r} is not a cron expression: {exc}.", "Use five fields, e.g. '0 3 * * *' (03:00 UTC)."
        ) from exc


# -- wrappers that let the daemon see what the loop saw --------------------------------------------
class _CapturingHistory:
    """Remembers the last history read, for the live error, without reading twice."""

    def __init__(self, inner: HistorySource) -> None:
        self.inner = inner
        self.last: Mapping[WorkloadRef, Series] = {}
        self.blocked: set[str] = set()
        #: The last read's per-workload errors from the wrapped source (Prometheus), for the report;
        #: never those of workloads this read left out (backing off).
        self.errors: dict[WorkloadRef, str] = {}
        #: Those of ``errors`` whose query answered with no data (``PrometheusHistory.empty``).
        self.empty: set[WorkloadRef] = set()

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        self.last = {}
        self.errors = {}
        self.empty = set()
        wanted = [p for p in policies if p.workload.key not in self.blocked]
        self.last = self.inner.read(wanted, now) if wanted else {}
        if wanted:
            keys = {p.workload for p in wanted}
            self.errors = {r: m for r, m in (getattr(self.inner, "errors", None) or {}).items() if r in keys}
            self.empty = {r for r in (getattr(self.inner, "empty", None) or ()) if r in keys}
        return self.last

    def retain(self, policies: Sequence[Policy]) -> int:
        """Passed through to the wrapped source (``PrometheusHistory.retain``) with the FULL set in
        force: a read leaves out the workloads backing off, whose history must stay."""
        retain = getattr(self.inner, "retain", None)
        return int(retain(policies)) if callable(retain) else 0

    def prune_cache(self) -> int:
        """Passed through to the wrapped source (``PrometheusHistory.prune_cache``)."""
        prune = getattr(self.inner, "prune_cache", None)
        return int(prune()) if callable(prune) else 0


class _RememberingTarget:
    """Adds the daemon's own recent decisions to the state, for scale-down stabilization."""

    def __init__(self, inner: Target, window_s: float) -> None:
        self.inner = inner
        self.window_s = window_s
        self.recent: dict[WorkloadRef, list[tuple[float, int]]] = {}
        self.last_state: ClusterState = ClusterState()
        self.blocked: set[str] = set()

    def remember(self, actions: Sequence[Action], now: float) -> None:
        """Keep each decision's count *before* stabilization (the HPA keeps its raw recommendations):
        a held count remembered as a decision would renew the hold every cycle, and without a
        forecast to cap it (a fallback) the workload would never scale down."""
        for a in actions:
            if isinstance(a, ScaleTo):
                raw = a.reason.details.get("raw_desired", a.to_replicas)
                # A decision stamped after now (the wall clock stepped back) counts from now: it
                # holds for one window on the new clock, not for the size of the step as well.
                items = [(min(t, now), d) for t, d in self.recent.get(a.workload, []) if now - t <= self.window_s]
                items.append((now, int(raw) if isinstance(raw, int | float) else a.to_replicas))
                self.recent[a.workload] = items

    def rebase(self, now: float) -> None:
        """The wall clock stepped back to ``now``: decisions stamped after it count from ``now``, so
        the planner, which reads nothing stamped after now, still holds a scale-down by them for one
        window (they were made in the past, before the step)."""
        for ref, items in self.recent.items():
            self.recent[ref] = [(min(t, now), d) for t, d in items]

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        state = self.inner.read_state(workloads)
        ws: dict[WorkloadRef, WorkloadState] = {}
        for ref, s in state.workloads.items():
            mine = tuple(self.recent.get(ref, ()))
            ws[ref] = replace(s, recent_desired=tuple(s.recent_desired) + mine) if mine else s
        self.last_state = replace(state, workloads=ws)
        return self.last_state

    def apply(self, action: Action) -> Any:
        if action.target in self.blocked:
            return ActionResult(action, "skipped", "backing off after errors")
        return self.inner.apply(action)


# -- the daemon ------------------------------------------------------------------------------------
@dataclass
class TickResult:
    now: float
    role: str  # "leader", "standby" or "error"
    report: CycleReport | None = None
    skipped: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()


def _stabilization_window(policies: Sequence[Policy]) -> float:
    """How long the daemon remembers decisions: the longest scale-down stabilization in force."""
    return max((p.spec.scale_down_stabilization_seconds for p in policies), default=300.0)


#: A champion that could not be loaded is tried again after this long (s).
UNLOADABLE_RETRY_S = 600.0


def _release_wait(failures: int) -> float:
    """How long (s) a removed function's failed release waits before the next try: 1 minute,
    doubled per failure in a row, at most an hour."""
    return min(60.0 * 2.0 ** (failures - 1), 3600.0)


#: How many retraining results ``Daemon.retrained`` keeps (it kept every one, each with its fitted
#: model, for the life of the process until 2026-12-05).
RETRAINED_KEPT = 8

#: Measured outcome rows that could not be written are kept for later cycles for at most this long
#: (s, by their bucket's start), so a database down for hours does not grow the process without bound.
OUTCOMES_KEPT_S = 3600.0


def _may_need_release(record: ManagedField) -> bool:
    """Whether a managed field may differ from what a release gives back: any record whose value
    before scaleahead is known (even a function scaleahead cooled to 0 gets its own min-scale back),
    else one that may hold warm instances scaleahead asked for: its recorded value, its last
    confirmed write or a pending write (whose answer was lost: it may have landed) above 0. A
    function warmed from 0 whose first answer was lost has a recorded value of 0."""
    if record.original_recorded:
        return True
    pending = parse_intent(record.resource_version)
    return max(record.value, record.written_value or 0, pending[0] if pending else 0) > 0


class Daemon:
    """The control loop with per-workload back-off, metrics, health, status and scheduled jobs.

    Args:
        deps: the loop's collaborators (history, forecaster, target, store, policies).
        settings: process settings (loop interval, jobs, server).
        clock: real or virtual.
        training_history: history for retraining (default: ``deps.history``), usually a longer window.
        leadership: leader election (default: always the leader).
        status_sink: where policy statuses go (default: nowhere).
        background_jobs: run jobs on a worker thread (production) instead of inline (tests).
        artifact_dir: where retrained model checkpoints go; report_dir: accuracy reports.
        unloadable: champion versions already found unloadable (at start-up), and when: checked
            again only after ``UNLOADABLE_RETRY_S``, so one damaged checkpoint is warned about once.
    """

    def __init__(
        self,
        deps: Deps,
        settings: Settings,
        clock: Clock,
        *,
        training_history: HistorySource | None = None,
        leadership: Leadership | None = None,
        status_sink: StatusSink | None = None,
        metrics: Metrics | None = None,
        background_jobs: bool = False,
        artifact_dir: Path | None = None,
        report_dir: Path | None = None,
        reference_error: float | None = None,
        policy_source: Callable[[], Sequence[Policy]] | None = None,
        policy_reload_s: float = 30.0,
        on_policies: Callable[[Sequence[Policy]], None] | None = None,
        on_lead: Callable[[float], object] | None = None,
        owns: Callable[[str], bool] | None = None,
        kept: Callable[[], Collection[str]] | None = None,
        unloadable: Mapping[int, float] | None = None,
    ) -> None:
        self.settings = settings
        #: Which workload keys are this process's (``run --shard``: the keys that hash to it;
        #: ``--namespace``: that namespace's); None: all.
        self.owns = owns
        #: Workload keys not planned but not given up (policy objects skipped as invalid): never released.
        self.kept = kept
        self._released_checked = -math.inf
        self._orphans: dict[str, float] = {}  # managed functions without a policy: since when
        self._release_retry: dict[str, tuple[int, float]] = {}  # failures in a row, next try
        self._dry_released: set[str] = set()  # reported once in a dry run
        self.clock = clock
        self.history = _CapturingHistory(deps.history)
        self.target = _RememberingTarget(deps.target, _stabilization_window(deps.policies))
        self.deps = deps
        self.training_history = training_history or deps.history
        self.leadership: Leadership = leadership or AlwaysLeader()
        self.status_sink = status_sink
        self.metrics = metrics or Metrics()
        self.health = Health(settings.server.stale_after_intervals * settings.loop.interval_s, clock.now)
        self._last_tick = -math.inf  # the last tick's time: a later tick before it means the clock stepped back
        self.backoff = Backoff(settings.loop.interval_s, settings.loop.max_backoff_s)
        self.live = LiveError(settings.jobs.error_sample_interval_s)
        #: Each service's measured outcome per bucket and rollout arm (``scaleahead.outcomes``), and a
        #: shadow rollout's challenger forecasts scored like production's (only for those outcomes).
        self.outcomes = OutcomeBook()
        self.shadow_live = LiveError(settings.jobs.error_sample_interval_s, report=False)
        self.live.on_score = self.shadow_live.on_score = self.outcomes.score
        self.artifact_dir = artifact_dir
        self.report_dir = report_dir
        self.reference_error = reference_error
        #: The last ``RETRAINED_KEPT`` retrainings' results (each holds its fitted model), newest
        #: last: for tests and debugging. Those the loop plans with are held by ``trials``.
        self.retrained: deque[RetrainResult] = deque(maxlen=RETRAINED_KEPT)
        #: Per rollout group, the running rollout followed and its challenger: (rollout id, model).
        self.trials: dict[str, tuple[int, RetrainResult]] = {}
        #: ``trials`` is read and changed on the loop's thread (``follow_rollout`` every minute) and
        #: on the job thread (a retraining, pruning): one at a time, else both could drop the same
        #: group (``KeyError``) or one's adoption be lost. Taken before ``_swap``, never inside it.
        self._trials_lock = threading.RLock()
        self._rollout_checked = -math.inf
        self._canaries_checked = -math.inf
        self._unfollowed: set[int] = set()  # rollouts whose challenger could not be loaded
        #: champion versions that could not be loaded, and when: tried again after UNLOADABLE_RETRY_S
        #: (a 60 s checkpoint refused at a start-up without history, assumed 10 s, loads once it comes)
        self._unloadable: dict[int, float] = dict(unloadable or {})
        #: The last ``RETRAINED_KEPT`` accuracy reports' paths, newest last (a list grew by one a day
        #: for the life of the process: found by ``bench soak``).
        self.reports: deque[Path] = deque(maxlen=RETRAINED_KEPT)
        self.last_drift_retrain = -math.inf
        self.cycle_backoff = 0.0
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="scaleahead-job") if background_jobs else None
        now = clock.now()
        #: Start of the period the next accuracy report covers (this process's start, then the last report).
        self.report_since = now
        self.jobs = Jobs(self._executor)
        j = settings.jobs
        if j.retrain_in_process:
            self.jobs.add("retrain", cron(j.retrain_cron, "jobs.retrain_cron"), self._retrain_scheduled, now)
        self.policy_source = policy_source
        self._leading = True  # whether the last tick led (a standby that becomes the leader reads the policies first)
        #: Whether the last tick led, None before the first: a change is logged (leader_acquired,
        #: leader_lost) and counted (scaleahead_leader_transitions_total).
        self._was_leader: bool | None = None
        self.on_policies = on_policies
        # Held while the policies (and what ``on_policies`` derives from them, such as a shard's
        # limits) are swapped in, and while a cycle takes its copy of them and of the settings:
        # a reload on the job thread never reaches a cycle half-way. While a cycle runs
        # (``_cycling``), what a reload removed is forgotten (gauges, live error, back-off, recent
        # decisions) only after the cycle's accounting, on the tick's thread (``_forget_removed``):
        # the cycle would write a removed workload's gauges again, and the job thread would change
        # the dictionaries the tick iterates.
        self._swap = threading.RLock()
        self._cycling = False
        self._removed: set[str] = set()
        self._retain_due = False  # the policies changed: drop the history no policy uses (``_forget_removed``)
        self._reload = threading.Lock()  # one policy read and swap at a time (job thread, new leader)
        #: Called once each time this replica starts to lead (its first cycle as leader, at start-up
        #: or after standing by), and at the tick after a failed cycle (``_cycle_failed_while_leading``),
        #: before the cycle: `run` reconciles the action journal there, which
        #: only the Lease holder may do (a standby would rewrite what the leader is applying). When it
        #: returns a count of actions it left unresolved (objects that could not be read), it is called
        #: again every ``actuation.reconcile_retry_s`` while this replica leads, until none is left.
        self.on_lead = on_lead
        self._lead_started = False
        #: Actions the last ``on_lead`` left unresolved (it returns their count), and when to call it
        #: again for them (``actuation.reconcile_retry_s`` later) while this replica leads.
        self._unresolved = 0
        self._reconcile_at = math.inf
        self._risk_resumed = False  # whether the risk adaptation was reset since this replica started to lead
        self._giving_up = False  # shutting down: the Lease is (being) released, a job's result is dropped
        if policy_source is not None:
            every = IntervalTrigger(seconds=policy_reload_s, start_date=_dt(now + policy_reload_s), timezone=UTC)
            self.jobs.add("reload_policies", every, self.reload_policies, now)
        self.jobs.add("accuracy_report", cron(j.report_cron, "jobs.report_cron"), self.accuracy_report, now)
        self.jobs.add("prune", cron(j.prune_cron, "jobs.prune_cron"), self.prune, now)
        for name in self.jobs.jobs:
            self.metrics.add_job(name)
        self.metrics.workloads.set(len(deps.policies))
        self.metrics.set_model(deps.forecaster.name, deps.model_version_id)
        self._by_workload = {p.workload: p for p in deps.policies}

    # -- one tick --------------------------------------------------------------------------------
    def _rebase(self, now: float) -> None:
        """After the wall clock stepped back to ``now``: what was timed from a later time is timed
        from ``now``, so the minute checks (rollouts, champion, released functions), a removed
        function's grace period and release retries, the reconcile retry, the drift cooldown, the
        live error's sampling, the interval jobs and the rebalance period do not wait out the step
        as well (found in review, 2026-12-05)."""
        self._rollout_checked = min(self._rollout_checked, now)
        self._released_checked = min(self._released_checked, now)
        self.last_drift_retrain = min(self.last_drift_retrain, now)
        retry = self.settings.actuation.reconcile_retry_s
        if self._reconcile_at != math.inf and retry > 0:
            self._reconcile_at = min(self._reconcile_at, now + retry)
        self._unloadable = {mid: min(at, now) for mid, at in self._unloadable.items()}
        # a removed function's grace period and its release retries, the live error's sampling
        self._orphans = {key: min(t, now) for key, t in self._orphans.items()}
        self._release_retry = {key: (n, min(t, now + _release_wait(n))) for key, (n, t) in self._release_retry.items()}
        self.live.rebase(now)
        self.shadow_live.rebase(now)
        self.jobs.rebase(now)
        last = self.deps.rebalance.last_at
        if last is not None and last > now:
            self.deps.rebalance.last_at = now

    def _identity(self) -> str:
        """This replica's name in the leader election (the Lease's holderIdentity), or ``-``."""
        identity = getattr(self.leadership, "identity", None)
        return identity if isinstance(identity, str) and identity else "-"

    def tick(self, now: float, lateness_s: float = 0.0) -> TickResult:
        """One control tick at ``now``: a cycle if leader, then due jobs."""
        if now < self._last_tick - 1.0:
            log.warning(
                "the wall clock stepped back %.0f s since the last tick (NTP?): the daemon's own recent "
                "decisions count from now for scale-down stabilization, and back-offs last at most %g s",
                self._last_tick - now,
                self.settings.loop.max_backoff_s,
                extra={"event": "clock_stepped_back", "step_s": round(self._last_tick - now, 3)},
            )
            self.target.rebase(now)
            self._rebase(now)
        self._last_tick = now
        self.health.tick(now)
        if not self.leadership.is_leader(now):
            if self._was_leader:
                log.warning(
                    "this replica (%s) lost the leader lease: standing by, another replica (or none) leads",
                    self._identity(),
                    extra={"event": "leader_lost", "identity": self._identity()},
                )
                self.metrics.leader_transitions.labels(to="standby").inc()
            self._was_leader = False
            self._leading = False
            self._lead_started = False
            self._risk_resumed = False
            self._unresolved, self._reconcile_at = 0, math.inf  # the next leader reconciles them
            self.metrics.unresolved.set(0)
            self.metrics.leader.set(0)
            self._orphans.clear()  # a leader again waits the whole release delay afresh
            self.metrics.cycles.labels(result="standby").inc()
            self.health.set_ready(True, "standby: another replica holds the lease")
            return TickResult(now, "standby")
        if not self._leading:
            # Just became the leader: a standby runs no jobs, so its policies may be days old.
            # Read them before the first cycle acts on them.
            self._leading = True
            if self.policy_source is not None:
                try:
                    self.reload_policies(now)
                except Exception as exc:  # noqa: BLE001 - the policies read last stay
                    log.warning(
                        "reading the policies on becoming the leader failed: %s",
                        exc,
                        extra={"event": "lead_policies_failed"},
                    )
        if not self._was_leader:
            log.info(
                "this replica (%s) holds the leader lease: it plans and acts",
                self._identity(),
                extra={"event": "leader_acquired", "identity": self._identity()},
            )
            self.metrics.leader_transitions.labels(to="leader").inc()
            self._was_leader = True
        self.metrics.leader.set(1)
        if not self._risk_resumed:
            # Another leader may have moved the risk adaptation's steps while this replica stood by:
            # its first cycle as leader resumes them from storage, not from its own stale memory.
            self.deps.risk.reset()
            self.deps.rebalance.reset()  # nor when pods were last moved: none in the period it starts to lead in
            self._risk_resumed = True
        if not self._lead_started and self.on_lead is not None:
            try:
                left = self.on_lead(now)
            except Exception as exc:  # noqa: BLE001 - tried again at the next tick
                log.warning(
                    "reconciling the journal on starting to lead (or after a failed cycle) failed: %s; tried again "
                    "at the next tick",
                    exc,
                    extra={"event": "lead_start_failed"},
                )
            else:
                self._lead_started = True
                self._left_unresolved(left, now)
        elif self._unresolved and now >= self._reconcile_at and self.on_lead is not None:
            # Actions whose objects could not be read stay 'planned'; look at them again while leading.
            try:
                left = self.on_lead(now)
            except Exception as exc:  # noqa: BLE001 - tried again after the retry period
                log.warning("reconciling the journal failed: %s", exc, extra={"event": "reconcile_failed"})
                left = self._unresolved
            self._left_unresolved(left, now)
        if now - self._rollout_checked >= 60.0:
            self._rollout_checked = now
            self.follow_rollout(now)
            self.follow_champion(now)
        with self._swap:  # this cycle's policies and settings: a reload in between waits or comes after
            deps = replace(self.deps, history=self.history, target=self.target)
            settings = self.settings.model_copy()  # ``settings.loop`` is replaced whole, never edited
            self._cycling = True
        try:
            return self._lead(now, lateness_s, deps, settings)
        except Exception:
            self._cycle_failed_while_leading(now)
            raise
        finally:
            with self._swap:  # what a reload during the cycle removed: forgotten after the cycle's accounting
                self._cycling = False
                self._forget_removed()

    def _cycle_failed_while_leading(self, now: float) -> None:
        """A cycle failed while this replica leads (the database gone in the middle of a plan, after
        a write may have landed): its journal rows can be left ``planned``, as by a crash. They are
        reconciled as when a replica starts to lead, at the next tick (and at each tick after it
        until a reconciliation succeeds); meanwhile ``scaleahead_actions_unresolved`` counts the rows
        the actuator could not settle. Until 2026-12-06 they stayed ``planned``, the metric at 0, for
        as long as the same replica led."""
        self._lift_fences_without_a_plan(now)
        self._export_fences()
        if self.on_lead is None:  # nothing reconciles here (a test's daemon, `replay`)
            return
        self._lead_started = False
        pending = getattr(self.deps.actuator, "unsettled", None)
        n = len(pending) if isinstance(pending, set | frozenset) else 0
        if n > self._unresolved:
            self._unresolved = n
            self.metrics.unresolved.set(n)

    def _lift_fences_without_a_plan(self, now: float) -> None:
        """The drain fences whose time is over are lifted even while the cycles fail (the
        actuator's ``lift_fences_without_a_plan``); not in a dry run, which writes nothing, nor
        while paused."""
        lift = getattr(self.deps.actuator, "lift_fences_without_a_plan", None)
        if lift is None or self.settings.actuation.dry_run or self.settings.actuation.paused:
            return
        try:
            lift(now)
        except Exception as exc:  # noqa: BLE001 - the cycle's own failure is what the tick reports
            log.warning(
                "drain_fence_lift_failed: lifting the fences whose time is over after a failed cycle failed: %s",
                exc,
                extra={"event": "drain_fence_lift_failed"},
            )

    def _export_fences(self) -> None:
        """``scaleahead_drain_fence_until_seconds``: the drain fences the actuator's target knows."""
        fences = getattr(self.deps.actuator, "known_fences", None)
        if callable(fences):
            try:
                known = fences()
            except Exception:  # noqa: BLE001 - a metric: the cycle is what counts
                return
            if isinstance(known, dict):
                self.metrics.observe_fences(known)

    def _left_unresolved(self, left: object, now: float) -> None:
        """Record how many actions the journal's reconciliation left unresolved (``on_lead``'s answer:
        an int; anything else counts as none) and when to reconcile them again."""
        self._unresolved = left if isinstance(left, int) and not isinstance(left, bool) and left > 0 else 0
        self.metrics.unresolved.set(self._unresolved)
        retry = self.settings.actuation.reconcile_retry_s
        self._reconcile_at = now + retry if self._unresolved and retry > 0 else math.inf

    def _lead(self, now: float, lateness_s: float, deps: Deps, settings: Settings) -> TickResult:
        """The leader's part of a tick: one cycle on ``deps`` and ``settings`` (this tick's copies),
        its accounting, metrics and status, then the jobs that are due."""
        # A workload backing off is not read, forecast or acted on; the planner's named fallback
        # still decides for it (shown in metrics and status), but its actions are held back.
        active = [p for p in deps.policies if not self.backoff.blocked(p.workload.key, now)]
        skipped = tuple(p.workload.key for p in deps.policies if self.backoff.blocked(p.workload.key, now))
        self.history.blocked = self.target.blocked = set(skipped)
        if deps.actuator is not None:  # the actuator writes without going through self.target
            deps.actuator.held = frozenset(skipped)
        t0 = time.perf_counter()
        report = run_once(deps, settings, now)
        wall = time.perf_counter() - t0
        self.target.remember(report.plan.actions, now)
        self._account(report, active, now)
        self.metrics.observe_cycle(
            report, lateness_s, {r: s.replicas for r, s in self.target.last_state.workloads.items()}
        )
        seen: set[str] = set()
        for ref, series in self.history.last.items():
            # the newest real sample: not NaN/Inf, nor beyond float32 (a 1e300 exporter overflow
            # counts as missing, as for the forecasters and the planner)
            real = np.flatnonzero(np.abs(series.values) <= F32_MAX)
            if real.size:
                self.metrics.observed.labels(workload=ref.key).set(float(series.values[real[-1]]))
                seen.add(ref.key)
        # A workload whose history read failed (or held no real sample) this cycle shows no observed
        # demand, as it shows no forecast: until 2026-12-07 the last value stayed, a flat stale line
        # on the dashboard's observed-vs-forecast panel (a review of in-cluster operation).
        unseen = {p.workload.key for p in deps.policies} - seen
        if unseen:
            self.metrics.forget_observed(unseen)
        for key in skipped:
            self.metrics.backoff.labels(workload=key).set(self.backoff.remaining(key, now))
        held_for = getattr(deps.actuator, "held_for", None)
        if isinstance(held_for, dict):  # fields left to another writer (a human edit, a co-writer)
            keys = {p.workload.key for p in deps.policies}
            for key in [k for k in held_for if k not in keys]:
                del held_for[key]
            self.metrics.observe_held(held_for, keys)
        self.metrics.cycles.labels(result="ok").inc()
        made_by = {ref: report.versions.get(ref, self.deps.model_version_id) for ref in report.forecasts}
        arms, shadow_arms = self._arms(report, deps, active)
        self.live.observe(report.forecasts, self.history.last, now, made_by, arms)
        if report.shadow_forecasts or self.shadow_live.pending:
            self.shadow_live.observe(
                report.shadow_forecasts,
                self.history.last,
                now,
                {ref: arm[2] for ref, arm in shadow_arms.items()},
                shadow_arms,
            )
        self._record_outcomes(report, active, arms, now, settings)
        if settings.jobs.evaluate_canaries and now - self._canaries_checked >= 60.0:
            # after this cycle wrote the bucket that just ended: the window's last one is in
            self._canaries_checked = now
            self.evaluate_canaries(now)
        self._export_live_error()
        self._export_fences()
        self._publish_status(report, now)
        self._release_removed(now, deps, settings)
        ran = self.jobs.run_due(now, self._run_job)
        if "retrain" in self.jobs.jobs and self._drifted(now) and not self._canary_deciding(now):
            self.last_drift_retrain = now
            log.warning(
                "live forecast error %.3f is above %.3f: retraining",
                self.live.overall(),
                self.drift_limit(),
                extra={"event": "drift", "live_error": self.live.overall()},
            )
            if self.jobs.submit_now(
                "retrain", now, lambda job, t: self._record_job(job.name, t, lambda: self._retrain(t, "drift"))
            ):
                ran.append("retrain(drift)")
        self.health.set_ready(True, "leader: cycles running")
        log.info(
            "cycle",
            extra={
                "event": "cycle",
                "now": now,
                "lateness_s": round(lateness_s, 4),
                "workloads": len(active),
                "backing_off": len(skipped),
                "changes": len(report.plan.changes),
                "fallbacks": len(report.plan.fallbacks),
                "errors": len(report.errors),
                "phase_ms": {k: round(v, 2) for k, v in report.phase_ms.items()},
                "cycle_ms": round(wall * 1000.0, 2),
                "jobs": ran,
            },
        )
        return TickResult(now, "leader", report, skipped, tuple(ran))

    def _account(self, report: CycleReport, active: Sequence[Policy], now: float) -> None:
        """Per-workload errors -> back-off; success clears it."""
        failed: dict[str, str] = {}
        history_failed = "history" in report.errors
        seen = self.history.last
        for p in active:
            ref = p.workload
            if ref.key in report.errors:
                why = report.errors[ref.key]
                failed[ref.key] = next((st for st in ("history", "state") if why.startswith(f"{st}:")), "forecast")
            elif not history_failed and ref not in seen:
                failed[ref.key] = "history"
        asked: dict[str, float] = {}  # the waits a throttling API server asked for, per workload
        for res in report.results:
            if res.outcome == "failed" and isinstance(res.action, ScaleTo | SetWarmPool):
                key = res.action.workload.key
                failed[key] = "action"
                if res.retry_after_s is not None:
                    asked[key] = max(asked.get(key, 0.0), res.retry_after_s)
        for p in active:
            key = p.workload.key
            if key in failed:
                wait = self.backoff.failed(key, now, asked.get(key, 0.0))
                self.metrics.workload_errors.labels(workload=key, stage=failed[key]).inc()
                self.metrics.backoff.labels(workload=key).set(wait)
                log.warning(
                    "%s failed at %s; backing off %.0f s",
                    key,
                    failed[key],
                    wait,
                    extra={"event": "backoff", "workload": key, "stage": failed[key], "backoff_s": wait},
                )
            elif key in self.backoff.failures:
                self.backoff.succeeded(key)
                self.metrics.backoff.labels(workload=key).set(0)

    def _arms(
        self, report: CycleReport, deps: Deps, policies: Sequence[Policy]
    ) -> tuple[dict[WorkloadRef, ArmOf], dict[WorkloadRef, ArmOf]]:
        """Per workload, the rollout (id, 0: none), arm and model version that acted this cycle; and
        per workload a shadow challenger forecast, its arm (only forecast, never acted)."""
        running = [deps.rollout] if deps.rollout is not None and deps.challenger is not None else []
        running += [view for view, _ in deps.trials]
        production = deps.model_version_id
        arms: dict[WorkloadRef, ArmOf] = {}
        shadow: dict[WorkloadRef, ArmOf] = {}
        for p in policies:
            ref = p.workload
            view = next((v for v in running if v.covers(p.spec.rollout_group)), None)
            if view is None:
                arms[ref] = (0, "champion", production)
                continue
            rid = view.rollout_id or 0
            # the arm the rollout assigns, whatever acted: a challenger that failed to forecast is
            # measured in its arm (its fallback steps counted), not moved to the champion's
            if view.arm(ref.key) == "challenger":
                arms[ref] = (rid, "challenger", view.challenger_version)
            else:
                arms[ref] = (rid, "champion", production)
            if ref in report.shadow_forecasts:
                shadow[ref] = (rid, "challenger", view.challenger_version)
        return arms, shadow

    def _record_outcomes(
        self,
        report: CycleReport,
        policies: Sequence[Policy],
        arms: Mapping[WorkloadRef, ArmOf],
        now: float,
        settings: Settings,
    ) -> None:
        """Score this cycle's outcomes (``OutcomeBook.step``) and write the buckets that have ended.
        A failed write keeps them for the next cycle, for at most ``OUTCOMES_KEPT_S``."""
        store = self.deps.store
        if store is None or not settings.jobs.record_outcomes:
            self.outcomes.sums.clear()
            return
        # Every workload whose state and fresh demand were read is scored, whatever failed for it
        # (a forecast, the challenger's): a fallback step counts in its arm, and is counted.
        fallbacks = {
            p.workload
            for p in policies
            if p.workload not in report.forecasts
            or (arms[p.workload][1] == "challenger" and p.workload not in report.versions)
        }
        self.outcomes.step(
            policies, self.target.last_state, self.history.last, now, settings.loop.interval_s, arms, fallbacks
        )
        rows = self.outcomes.take(now)
        if not rows:
            return
        try:
            store.record_outcomes(rows)
        except Exception as exc:  # noqa: BLE001 - the loop goes on; the rows wait for the next cycle
            kept = [r for r in rows if now - r["bucket"] <= OUTCOMES_KEPT_S]
            self.outcomes.put_back(kept)
            log.warning(
                "measured outcomes of %d bucket row(s) could not be recorded (%s); %s",
                len(rows),
                # the driver's error on one line, not SQLAlchemy's whole statement and parameters
                " ".join(str(getattr(exc, "orig", None) or exc).split())[:300],
                f"kept for the next cycle, {len(rows) - len(kept)} older than {OUTCOMES_KEPT_S:.0f} s dropped"
                if len(kept) < len(rows)
                else "kept for the next cycle",
                extra={"event": "outcomes_not_recorded", "rows": len(rows), "dropped": len(rows) - len(kept)},
            )

    def _export_live_error(self) -> None:
        for ref, err in self.live.error.items():
            self.metrics.live_error.labels(workload=ref.key).set(err)
        overall = self.live.overall()
        if math.isfinite(overall):
            self.metrics.live_error_all.set(overall)

    def _not_applied(self, action: ScaleTo | SetWarmPool, res: ActionResult | None) -> tuple[str, str] | None:
        """``(lastReasonCode, lastReason)`` of a planned change that did not happen this cycle (a code
        of ``NOT_APPLIED``), else None: applied, nothing to change, or no result (nothing acts here).
        The reason says why, from the action's result (who holds the field and until when), then
        what the plan wanted, so ``Desired`` (the plan's wish) and ``Current`` need no guessing."""
        planned = f"planned: {action.reason.message}"
        key = action.workload.key
        if key in self.target.blocked:  # held back this cycle, whatever the plan (a fallback's hold too)
            until = self.backoff.until.get(key)
            when = f" until {_dt(until).strftime('%Y-%m-%dT%H:%M:%SZ')}" if until is not None else ""
            n = self.backoff.failures.get(key, 0)
            return (
                "backing_off",
                f"not applied: backing off after {n} failed cycle{'s' if n != 1 else ''} in a row{when} "
                f"(logs event=backoff, scaleahead_workload_backoff_seconds); {planned}",
            )
        if res is not None and res.written is not None and (res.outcome == "applied" or res.cause == "noop"):
            asked = desired_value(action)
            if res.written != asked:
                # The actuator's limits cut it (loop reasons audit: the status said "forecast", "scale
                # 3 -> 12" every cycle while the HPA's maxReplicas kept the floor at 6).
                done = "applied" if res.outcome == "applied" else "in place"
                return (
                    "action_limited",
                    f"{done} at {res.written}, not the planned {asked}: {res.detail}; {planned}",
                )
        if res is None or res.outcome == "applied" or res.cause == "noop" or action.is_noop:
            return None
        if res.outcome == "dry-run":
            if self.settings.actuation.paused:
                return (
                    "paused",
                    f"not applied: actuation is paused (settings actuation.paused): {res.detail}; {planned}",
                )
            return "dry_run", f"not applied: dry run (settings actuation.dry_run): {res.detail}; {planned}"
        if res.outcome == "failed":
            return "action_failed", f"not applied: the write failed: {res.detail}; {planned}"
        code = res.cause if res.cause in ("paused", "backing_off", "human_edit", "co_writer") else "action_skipped"
        return code, f"not applied: {res.detail}; {planned}"

    def _status_models(self, report: CycleReport) -> Callable[[WorkloadRef], str]:
        """The status's ``model`` of a workload: production's forecaster, or, for a workload on a
        running canary's or A/B rollout's challenger arm whose forecast the cycle used (``report.versions``),
        the challenger's name and version. Until 2026-12-06 it named production's for every workload."""
        deps = self.deps
        running = [(deps.rollout, deps.challenger)] if deps.rollout is not None and deps.challenger is not None else []
        names = {view.challenger_version: model.name for view, model in (*running, *deps.trials)}
        production = deps.forecaster.name

        def model_of(ref: WorkloadRef) -> str:
            if ref not in report.versions:
                return production
            version = report.versions[ref]
            name = names.get(version, "challenger")
            return f"{name} (challenger, version {version})" if version is not None else f"{name} (challenger)"

        return model_of

    def _publish_status(self, report: CycleReport, now: float) -> None:
        """Each planned policy's status after the cycle's actions: the plan's decision, and, when its
        change was not applied (held, failed, dry run, paused, backing off), why (``_not_applied``).
        Until 2026-12-06 it told the plan's reason only: a change a GitOps tool kept undoing showed
        ``lastReasonCode: forecast``, "scale shop/web 3 -> 14", every cycle while nothing was written."""
        if self.status_sink is None:
            return
        if any(r.cause == "not_leader" for r in report.results):
            # The Lease was lost during the cycle: the statuses are the new leader's to write (found by
            # a review: "not applied: not the leader" overwrote the new leader's, whose writer thought
            # its own still stood).
            log.info("lost the lease during the cycle: its statuses are left to the new leader")
            return
        statuses = []
        results = {id(r.action): r for r in report.results}  # the result of each of the plan's actions
        model_of = self._status_models(report)
        for a in report.plan.actions:
            if not isinstance(a, ScaleTo | SetWarmPool):
                continue
            pol = self._by_workload.get(a.workload)  # one read: a reload may swap the dict meanwhile
            if pol is None:
                continue
            fallback = report.plan.fallbacks.get(a.workload, "none")
            code, reason = self._not_applied(a, results.get(id(a))) or (a.reason.code, a.reason.message)
            if isinstance(a, SetWarmPool):  # a function's warm pool: its warm instances, not replicas
                statuses.append(
                    PolicyStatus(
                        pol.metadata.name,
                        pol.metadata.namespace,
                        a.workload.key,
                        None,
                        None,
                        None,
                        fallback,
                        reason,
                        code,
                        now,
                        WARM_POOL_MODEL,
                        a.to_instances,
                        a.from_instances,
                    )
                )
                continue
            peak = a.reason.details.get("forecast_peak")
            statuses.append(
                PolicyStatus(
                    pol.metadata.name,
                    pol.metadata.namespace,
                    a.workload.key,
                    a.to_replicas,
                    a.from_replicas,
                    float(peak) if isinstance(peak, int | float) else None,
                    fallback,
                    reason,
                    code,
                    now,
                    model_of(a.workload),
                )
            )
        unread = {key: why for key, why in report.errors.items() if why.startswith("state: ")}
        if unread:  # not planned: the status says why, with no replicas (unknown now), not the last ones
            for ref, pol in list(self._by_workload.items()):
                why = unread.get(ref.key)
                if why is None:
                    continue
                statuses.append(
                    PolicyStatus(
                        pol.metadata.name,
                        pol.metadata.namespace,
                        ref.key,
                        None,
                        None,
                        None,
                        report.plan.fallbacks.get(ref, "none"),
                        f"not planned: its state cannot be read ({why.removeprefix('state: ')}); "
                        "planned again once it is read",
                        "state_unreadable",
                        now,
                        WARM_POOL_MODEL
                        if pol.spec.workload_class == WorkloadClass.FUNCTION and pol.spec.warm_pool.enabled
                        else self.deps.forecaster.name,
                    )
                )
        try:
            self.status_sink.publish(statuses)
        except Exception as exc:  # noqa: BLE001 - status is informative; the loop goes on
            log.warning("publishing policy status failed: %s", exc, extra={"event": "status_failed"})

    def drift_limit(self) -> float:
        """Live error above which the model has drifted: ratio x reference, else the absolute threshold."""
        j = self.settings.jobs
        ref = self.reference_error
        if ref is not None and math.isfinite(ref) and ref > 0:
            return j.drift_ratio * ref
        return j.drift_threshold

    def _canary_deciding(self, now: float) -> bool:
        """Whether a retrained canary is running that this daemon decides on measured outcomes
        (``jobs.evaluate_canaries``): a drift retraining would supersede it before it can finish (its
        steps x ``window_s``, 4 hours by default, against the drift cooldown's hour), so it waits
        until the canary is promoted or rolled back (a review of 2026-12-07: persistent drift
        superseded every retrained canary an hour in, and none was ever promoted). Logged once per
        drift cooldown (``drift_retrain_deferred``)."""
        store = self.deps.store
        if store is None or not self.settings.jobs.evaluate_canaries:
            return False
        try:
            running = [r for r in store.rollouts(state="running") if r.mode == "canary" and r.results.get("retrained")]
        except Exception:  # noqa: BLE001 - the database is down: the retraining would fail anyway
            return False
        if running:
            self.last_drift_retrain = now  # the cooldown: checked and logged again an interval later
            log.info(
                "live forecast error %.3f is above %.3f, but retrained canary rollout %s is running and decides first",
                self.live.overall(),
                self.drift_limit(),
                ", ".join(str(r.id) for r in running),
                extra={"event": "drift_retrain_deferred", "rollouts": [r.id for r in running]},
            )
        return bool(running)

    def _drifted(self, now: float) -> bool:
        j = self.settings.jobs
        overall = self.live.overall()
        return (
            math.isfinite(overall)
            and overall > self.drift_limit()
            and self.live.matured >= j.drift_min_forecasts
            and now - self.last_drift_retrain >= j.drift_cooldown_s
        )

    #: Most releases one check makes (a mass removal goes on at the next checks, a minute apart).
    RELEASES_PER_CHECK = 50
    #: Time one check may spend reading the Services before it writes what it found (s): it runs in
    #: the tick, so a slow API server leaves the rest to the next check instead of stalling cycles.
    RELEASE_BUDGET_S = 5.0

    def _release_removed(self, now: float, deps: Deps, settings: Settings) -> None:
        """Once a minute: the functions scaleahead set warm instances on (the managed-field records)
        that no policy names any more, for ``actuation.release_removed_after_s`` in a row as this
        leader saw it, get back the min-scale they had before scaleahead where they still hold the
        value scaleahead wrote
        (``Actuator.release``), at most ``RELEASES_PER_CHECK`` at a time. A policy that comes back, or
        is only skipped as invalid (``kept``), keeps its pool. Nothing while actuation is paused or
        the kill switch is on; in a dry run each is reported once; a failed release is tried again
        after 1, 2, 4, ... minutes (at most an hour). The records are in storage, so a restart still
        finds what a removed policy left."""
        after = settings.actuation.release_removed_after_s
        actuator, store = deps.actuator, deps.store
        if after is None or actuator is None or store is None or now - self._released_checked < 60.0:
            return
        self._released_checked = now
        named = {p.workload.key for p in deps.policies}
        try:
            kept = set(self.kept()) if self.kept is not None else set()
            rows = store.managed_fields()
        except Exception as exc:  # noqa: BLE001 - looked at again in a minute
            log.warning("reading the managed fields failed: %s", exc)
            return
        orphans = {
            r.target
            for r in rows
            if _may_need_release(r)
            and r.target.split("/", 1)[0] in actuator.RELEASED_KINDS
            and r.target not in named
            and r.target not in kept
            and (self.owns is None or self.owns(r.target))
        }
        self._orphans = {key: self._orphans.get(key, now) for key in orphans}
        self._release_retry = {k: v for k, v in self._release_retry.items() if k in orphans}
        dry = settings.actuation.dry_run
        due = sorted(
            key
            for key, since in self._orphans.items()
            if now - since >= after
            and now >= self._release_retry.get(key, (0, -math.inf))[1]
            and not (dry and key in self._dry_released)
        )[: self.RELEASES_PER_CHECK]
        if not due or settings.actuation.paused or actuator.stop_reason(now):
            return
        try:
            results = actuator.release(due, now, dry_run=dry, budget_s=self.RELEASE_BUDGET_S)
        except Exception as exc:  # noqa: BLE001 - tried again in a minute
            log.warning("releasing removed policies' warm instances failed: %s", exc)
            return
        for res in results:
            key = res.action.target
            if res.outcome == "failed":
                n = self._release_retry.get(key, (0, 0.0))[0] + 1
                self._release_retry[key] = (n, now + _release_wait(n))
            else:
                self._release_retry.pop(key, None)
            if dry:  # reported once (a dry run forgets nothing, so the same result would repeat)
                self._dry_released.add(key)
            self.metrics.actions.labels(kind=res.action.kind, result=res.outcome).inc()
            log.info(
                "%s: %s %s",
                key,
                res.outcome,
                res.detail,
                extra={"event": "policy_removed_release", "target": key, "result": res.outcome},
            )

    def set_policies(self, policies: Sequence[Policy]) -> None:
        """Replace the policies (from the cluster); a removed workload's state is forgotten. With
        ``on_policies`` (called last), under the lock a cycle takes its copy under."""
        with self._swap:
            self._set_policies(policies)

    def _set_policies(self, policies: Sequence[Policy]) -> None:
        gone = {p.workload.key for p in self.deps.policies} - {p.workload.key for p in policies}
        self.deps = replace(self.deps, policies=list(policies))
        self._by_workload = {p.workload: p for p in self.deps.policies}
        # the stabilization memory spans the longest window of the policies now in force
        self.target.window_s = _stabilization_window(policies)
        self._removed |= gone
        self._retain_due = True  # the history of queries no policy uses any more is dropped with them
        if not self._cycling:  # else the tick forgets them once its cycle is accounted for
            self._forget_removed()
        self.metrics.workloads.set(len(policies))
        if self.on_policies is not None:
            self.on_policies(self.deps.policies)

    def _forget_removed(self) -> None:
        """Forget the workloads that lost their policy (under ``_swap``, with no cycle running): their
        back-off, recent decisions, gauges and live error. A policy that came back is kept."""
        keys = {p.workload.key for p in self.deps.policies}
        for key in list(self.backoff.failures):
            if key not in keys:
                self.backoff.succeeded(key)
        for ref in [r for r in self.target.recent if r.key not in keys]:
            del self.target.recent[ref]
        gone, self._removed = self._removed - keys, set()
        if self._retain_due:
            # The full set, not the last read's (which leaves out workloads backing off). Here, with
            # no cycle running, the loop's history is read by no one else.
            self._retain_due = False
            self.history.retain(self.deps.policies)
        if gone:
            self.metrics.forget(gone)  # its gauges would otherwise stay (and alert) until a restart
            self.live.forget(gone)  # and its error would come back, frozen, in the gauge and the median
            self.shadow_live.forget(gone)
            self.outcomes.forget(gone)

    def reload_policies(self, now: float) -> int:
        """Read the policies again (the ``reload_policies`` job); keep the old ones if that fails.
        One read and swap at a time: the job thread's and a new leader's (``run --shard`` splits its
        limits on the last read, so a read must reach ``set_policies`` before another starts)."""
        if self.policy_source is None:
            return len(self.deps.policies)
        with self._reload:
            return self._reload_policies()

    def _reload_policies(self) -> int:
        assert self.policy_source is not None
        policies = list(self.policy_source())
        old = {p.workload.key: p for p in self.deps.policies}
        before, after = set(old), {p.workload.key for p in policies}
        # by workload: ``p not in list`` compared every pair, 95 s of CPU per reload at 10,000
        # policies (found by a scale audit), on the loop thread for a replica that becomes leader
        if before != after or any(old[p.workload.key] != p for p in policies):
            log.info(
                "policies changed: %d -> %d",
                len(before),
                len(after),
                extra={
                    "event": "policies_reloaded",
                    "added": sorted(after - before),
                    "removed": sorted(before - after),
                },
            )
        self.set_policies(policies)
        return len(policies)

    # -- jobs ------------------------------------------------------------------------------------
    def _run_job(self, job: Job, now: float) -> object:
        return self._record_job(job.name, now, lambda: job.func(now))

    def _record_job(self, name: str, now: float, work: Callable[[], object]) -> object:
        """Run a job's work and count it once: ok, or error when it raises (the loop goes on)."""
        try:
            out = work()
        except DataError:  # the job said why (e.g. retrain_skipped); no traceback
            self.metrics.job_ended(name, "error", now)
            return None
        except UserError as exc:  # foreseeable (a folder gone or not writable): what and what to do, no traceback
            self.metrics.job_ended(name, "error", now)
            log.error("job %s failed: %s", name, exc.message, extra={"event": "job_failed", "job": name})
            return None
        except Exception as exc:  # noqa: BLE001 - a failed job must not stop the loop
            self.metrics.job_ended(name, "error", now)
            log.exception("job %s failed: %s", name, exc, extra={"event": "job_failed", "job": name})
            return None
        self.metrics.job_ended(name, "ok", now)
        return out

    def _still_leading(self) -> bool:
        """Whether a job may still write what it made (a retraining's model version and rollout),
        asked just before it does: the last tick led, the daemon is not shutting down, and the
        Lease is still held as of its last renewal (``holds_now`` where the election has one: no
        API call, on the job's thread). Until 2026-12-06 a job started while leading wrote after
        the replica had lost the Lease."""
        if self._giving_up or not self._leading:
            return False
        holds = getattr(self.leadership, "holds_now", None)
        return bool(holds()) if callable(holds) else True

    def _retrain_scheduled(self, now: float) -> RetrainResult | None:
        return self._retrain(now, "schedule")

    def _retrain(self, now: float, trigger: str) -> RetrainResult | None:
        if self.deps.store is None:
            log.warning("retraining needs a database; skipped", extra={"event": "retrain_skipped"})
            return None
        if self.artifact_dir is not None and writes_checkpoint(retrained_family(self.settings)):
            # before the fit (minutes): a folder gone failed only after it; a baseline writes nothing there
            self._check_artifact_dir(self.artifact_dir)
        policies = self.deps.policies
        try:
            history = self.training_history.read(policies, now)
            result = retrain(
                policies,
                history,
                self.deps.store,
                self.settings,
                now,
                champion=self.deps.forecaster,
                champion_label=(
                    str(self.deps.model_version_id)
                    if self.deps.model_version_id is not None
                    else self.deps.forecaster.name
                ),
                trigger=trigger,
                artifact_dir=self.artifact_dir,
                still_leading=self._still_leading,
                **read_problems(self.training_history),
            )
        except DataError as exc:  # counted as a failed run by _record_job
            log.warning("retraining skipped: %s", exc, extra={"event": "retrain_skipped"})
            raise
        finally:
            # The training window (a week of every workload: ~600 MB for 1,000 at 10 s) is read once
            # a day; between retrainings its source need not hold it (its disk cache, if any, stays).
            # Its cache folder keeps only the policies' history: a removed workload's week goes (its
            # only reader is this job, so here nothing else reads it meanwhile).
            release = getattr(self.training_history, "release", None)
            retain = getattr(self.training_history, "retain", None)
            if self.training_history is not self.deps.history and callable(release):
                release()
            if self.training_history is not self.deps.history and callable(retain):
                retain(policies)
        self.retrained.append(result)
        self.live.reset_drift()
        if result.rollout_ids and result.model is not None:
            with self._trials_lock:
                for row in self.deps.store.rollouts(ids=result.rollout_ids):
                    self.trials[row.group] = (row.id, result)
                self.follow_rollout(now)
        return result

    @staticmethod
    def _check_artifact_dir(folder: Path) -> None:
        """Make ``folder`` (``--artifacts``/models) if missing and check it can be written, as ``run
        --artifacts`` checks the folder at start-up; a ``UserError`` saying what to do when it cannot
        (the volume gone or read-only, a file in its place since the start)."""
        what = "the checkpoint folder (under --artifacts)"
        try:
            check_folder(folder, what, create=False)  # names an ancestor that is a file
            check_folder(folder, what)  # made now, and written in
        except UserError as exc:
            raise UserError(
                f"Retraining skipped before fitting: {exc.what}",
                f"Make {folder} a writable folder again (the volume mounted, not a file, not read-only), or restart "
                "`scaleahead run` with --artifacts naming one; the next retraining (jobs.retrain_cron, or drift) "
                "checks it again. Nothing was fitted or registered.",
            ) from exc

    @property
    def trial(self) -> tuple[int, RetrainResult] | None:
        """The followed rollout of the first rollout group (by name) that has one."""
        with self._trials_lock:
            return self.trials[min(self.trials)] if self.trials else None

    def follow_rollout(self, now: float) -> None:
        """Keep the loop in step with the running rollouts, one per rollout group (checked every minute).

        Running: the loop forecasts with the challenger for its arm (canary, A/B) or plans with it
        without acting (shadow, recorded for ``scaleahead rollout evaluate``), for the workloads of
        that group only. Promoted (by ``scaleahead rollout promote`` or a canary's last step): the
        challenger becomes the production forecaster (of every group: there is one champion).
        Aborted, rolled back or superseded: it is dropped. A group without a followed rollout adopts
        one started outside this process (``_adopt_rollout``). Called on the loop's thread and on
        the job thread (after a retraining): one call at a time (``_trials_lock``).
        """
        with self._trials_lock:
            self._follow_rollout(now)

    def _follow_rollout(self, now: float) -> None:
        store = self.deps.store
        if store is None:
            return
        from actuator.rollouts import RolloutBook

        book = RolloutBook(store)
        for group in sorted({p.spec.rollout_group for p in self.deps.policies}):
            if group not in self.trials:
                adopted = self._adopt_rollout(now, group)
                if adopted is not None:
                    self.trials[group] = adopted
        if not self.trials:
            if self.deps.trials or self.deps.rollout is not None:
                with self._swap:  # a policy swap between the read and the write would be lost
                    self.deps = replace(self.deps, rollout=None, challenger=None, trials=())
            return
        # only the followed ones, by id: the table keeps every rollout ever started
        rows = {r.id: r for r in store.rollouts(ids=[rid for rid, _ in self.trials.values()])}
        running: list[tuple[RolloutView, Forecaster]] = []
        for group, (rid, result) in sorted(self.trials.items()):
            row = rows.get(rid)
            if row is None:
                continue
            if row.state == "running":
                view = book.view(group)
                if view is not None and result.model is not None:
                    running.append((replace(view, challenger_version=result.model_version_id), result.model))
                continue
            del self.trials[group]
            if row.state == "promoted" and result.model is not None:
                if self.deps.model_version_id == result.model_version_id:
                    continue  # the same version promoted in another group already
                self._to_production(result.model, result.model_version_id, result.metrics.get("holdout_wape"))
                log.info(
                    "rollout %d promoted: model %d is now in production",
                    rid,
                    result.model_version_id,
                    extra={"event": "model_promoted", "model_version_id": result.model_version_id},
                )
        with self._swap:  # a policy swap between the read and the write would be lost
            self.deps = replace(self.deps, rollout=None, challenger=None, trials=tuple(running))

    def evaluate_canaries(self, now: float) -> list[dict[str, Any]]:
        """Evaluate each followed running canary on the measured outcomes (``jobs.evaluate_canaries``)
        once its window, and the bucket after it, has passed, as ``scaleahead rollout evaluate
        --measured`` does: advance, promote (its challenger's checkpoint checked first) or roll back.
        A rollout changed meanwhile, or a challenger that cannot be promoted, is logged and left as
        it is. Returns the decisions recorded."""
        store = self.deps.store
        if store is None:
            return []
        from actuator.rollouts import CanaryParams, RolloutBook
        from scaleahead.commands.rollout import promotion_check
        from scaleahead.outcomes import BUCKET_S, decide_on_measured, measured_outcomes, window_start

        book = RolloutBook(store)
        # a learned challenger is promoted only when its checkpoint loads, as `rollout promote` checks it
        check = promotion_check(
            store,
            evaluating=True,
            note=lambda text: log.warning("%s", text, extra={"event": "canary_promotion_note"}),
        )
        with self._trials_lock:
            ids = [rid for rid, _ in self.trials.values()]
        decided: list[dict[str, Any]] = []
        for r in store.rollouts(ids=ids) if ids else []:
            if r.state != "running" or r.mode != "canary" or r.share >= 1.0 - 1e-12:
                continue  # at 100 % nothing is left to compare with: promote or abort it by hand
            if now - window_start(r) < CanaryParams.from_stored(r.params).window_s + BUCKET_S:
                continue  # the window's last bucket is written by the first cycle after it ends (this one)
            group = [p.workload.key for p in self.deps.policies if p.spec.rollout_group == r.group]
            try:
                arms, measured = measured_outcomes(store, r, now, assigned=group)
                entry = decide_on_measured(book, r, arms, measured, now, check)
            except Exception as exc:  # noqa: BLE001 - the canary stays as it was; tried at the next check
                log.warning(
                    "canary rollout %d (group %s) was not evaluated: %s",
                    r.id,
                    r.group,
                    getattr(exc, "what", None) or exc,
                    extra={"event": "canary_not_evaluated", "rollout": r.id, "group": r.group},
                )
                continue
            decided.append(entry)
            log.info(
                "canary rollout %d (group %s) at %.0f%%: %s: %s",
                r.id,
                r.group,
                r.share * 100.0,
                entry["decision"],
                entry["reason"],
                extra={
                    "event": "canary_evaluated",
                    "rollout": r.id,
                    "group": r.group,
                    "decision": entry["decision"],
                    "share": r.share,
                    "champion_workloads": entry.get("champion_workloads"),
                    "challenger_workloads": entry.get("challenger_workloads"),
                    "other_arm": len(measured.other_arm),
                    "under_measured": len(measured.under_measured),
                    "baseline": measured.baseline,
                },
            )
        return decided

    def follow_champion(self, now: float) -> None:
        """Switch production to the registry's champion when it changes (checked every minute).

        The champion of the production model's family (``forecast.model`` until a version is in
        production) is the newest version with status ``champion`` (or ``production``). It changes
        without this process: a rollout of another rollout group promoted, ``scaleahead models
        promote ID`` (a rollback), or another replica. The version is loaded as at start-up (an
        learned model from its stored checkpoint, a baseline fitted on the loop's history); one that
        cannot be loaded is logged, production stays as it is, and it is tried again after
        ``UNLOADABLE_RETRY_S`` (the history it is checked against may have arrived since).
        """
        store = self.deps.store
        if store is None:
            return
        current = self.deps.model_version_id
        try:
            family = store.model(current).family if current is not None else self.settings.forecast.model
        except UserError:  # the version was deleted from the registry: keep what runs
            return
        newest = store.champion(family)  # one row: the registry keeps every version ever trained
        failed_at = self._unloadable.get(newest.id) if newest is not None else None
        if newest is None or newest.id == current or (failed_at is not None and now - failed_at < UNLOADABLE_RETRY_S):
            return
        was = str(current) if current is not None else self.deps.forecaster.name
        try:
            model = self._load_version(store, newest.id)
        except (DataError, UserError) as exc:
            self._unloadable[newest.id] = now
            log.warning(
                "model %d is the champion of %s in the registry but cannot be loaded (%s); production stays %s",
                newest.id,
                family,
                exc,
                was,
                extra={"event": "champion_not_loaded", "model_version_id": newest.id},
            )
            if current is None and family in LEARNED:
                # production is still the fallback (as on a fresh install), now because the champion
                # cannot be loaded: the gauge says so (until 2026-12-06 it kept "no_model", and
                # ScaleaheadModelUnloadable never fired)
                self.metrics.set_fallback(family, "unloadable")
            return
        if model is None:
            return  # a baseline waits for the loop's history: the next check, after a cycle
        self._to_production(model, newest.id, newest.metrics.get("holdout_wape"))
        log.info(
            "model %d is the champion of %s in the registry: now in production (was %s)",
            newest.id,
            family,
            was,
            extra={"event": "model_changed", "model_version_id": newest.id},
        )

    def _load_version(self, store: Any, model_id: int) -> Forecaster | None:
        """A registered version's forecaster (``load_model_version``), or None while a baseline has
        no history yet to be fitted on (after a restart the first check comes before the first
        cycle). Raises ``DataError`` / ``UserError`` when it cannot be loaded."""
        history = [s for s in self.history.last.values() if len(s) > 0]
        if not history and store.model(model_id).family not in LEARNED:
            return None
        step = history[0].step_s if history else 10.0
        return load_model_version(store, model_id, step, history, self.settings.forecast.horizon_s, self.clock.now())

    def _to_production(self, model: Forecaster, model_version_id: int, holdout_wape: object) -> None:
        """Plan with ``model`` from now on (every group), and measure drift against its error."""
        with self._swap:  # a policy swap between the read and the write would be lost
            self.deps = replace(self.deps, forecaster=model, model_version_id=model_version_id)
        self.metrics.set_model(model.name, model_version_id)
        self.metrics.set_fallback(model.name, None)  # a registered version runs: no fallback any more
        if isinstance(holdout_wape, float) and holdout_wape > 0:
            self.reference_error = holdout_wape

    def _adopt_rollout(self, now: float, group: str) -> tuple[int, RetrainResult] | None:
        """A running rollout of ``group`` someone else started (the retraining CronJob, ``scaleahead
        rollout start``) whose challenger is a registered model version: load that model and follow
        it like one of ours. A version that cannot be loaded is logged once and left alone."""
        from actuator.rollouts import RolloutBook

        store = self.deps.store
        if store is None:
            return None
        row = RolloutBook(store).running(group)
        if row is None or not row.challenger.isdigit() or row.id in self._unfollowed:
            return None
        mid = int(row.challenger)
        try:
            model = self._load_version(store, mid)
        except (DataError, UserError) as exc:
            self._unfollowed.add(row.id)
            log.warning(
                "rollout %d: challenger model %d cannot be loaded (%s); not planned with",
                row.id,
                mid,
                exc,
                extra={"event": "rollout_not_followed", "rollout": row.id},
            )
            return None
        if model is None:
            return None  # a baseline waits for the loop's history: the next check, after a cycle
        log.info(
            "following rollout %d (%s) of model %d, started outside this process",
            row.id,
            row.mode,
            mid,
            extra={"event": "rollout_followed", "rollout": row.id, "model_version_id": mid},
        )
        return row.id, RetrainResult(mid, store.model(mid).family, (row.id,), {}, "", model)

    def accuracy_report(self, now: float) -> Path | None:
        """Write the accuracy of the forecasts that matured since the last report (JSON).

        The counts are reset and the period moves on only once the report is written: when the
        write fails (its folder replaced by a file, not writable, a full disk) a ``UserError`` says
        so, and the next report covers the whole period since the last one written."""
        since = self.report_since
        if not self._still_leading():
            # Until 2026-12-06 a replica that had lost the Lease between the job's start and here
            # still wrote its report, under the same file name as the new leader's.
            log.warning(
                "accuracy report not written: this replica no longer holds the leader Lease (the leader writes it)",
                extra={"event": "accuracy_report_skipped"},
            )
            return None
        with self.live.daily_taken() as (per, totals):  # put back if the write below raises
            wapes = [float(w) for v in per.values() if isinstance(w := v.get("wape"), float)]
            doc = {
                "created_at": _dt(now).strftime("%Y-%m-%dT%H:%M:%SZ"),
                # What it covers: the forecasts scored since the last report, or since this process
                # started (a restart or a new leader starts afresh).
                "period_start": _dt(since).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "period_end": _dt(now).strftime("%Y-%m-%dT%H:%M:%SZ"),
                # Production's model when the report is written; the forecasts scored may have been made
                # by others (a rollout's challenger arm, the champion before a promotion):
                # forecasts_by_model_version counts them, here and per workload.
                "model": self.deps.forecaster.name,
                "model_version_id": self.deps.model_version_id,
                "forecasts_by_model_version": totals,
                "workloads": per,
                "median_wape": statistics.median(wapes) if wapes else None,
            }
            path = None
            if self.report_dir is not None:
                # Named for the day the period starts in: at 00:05 (the default) that is the day just ended.
                path = self.report_dir / f"accuracy-{_dt(since).strftime('%Y-%m-%d')}.json"
                self._write_report(path, doc, since)
            self.report_since = now
        log.info("accuracy report", extra={"event": "accuracy_report", "median_wape": doc["median_wape"]})
        if path is not None:
            self.reports.append(path)
        return path

    def _write_report(self, path: Path, doc: Mapping[str, Any], since: float) -> None:
        """Write ``doc`` to ``path`` whole (a temporary file renamed into place: a full disk leaves no
        half a report), or a ``UserError`` naming the folder and what to do."""
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise UserError(
                f"The accuracy report {path} could not be written ({exc.strerror or exc}); its counts are kept: "
                f"the next report covers the whole period since {_dt(since).strftime('%Y-%m-%dT%H:%M:%SZ')}.",
                f"Make {path.parent} a writable folder (not a file; a mounted volume with free space), or set "
                "jobs.report_dir to one; the report is written at the next jobs.report_cron.",
            ) from exc

    def prune(self, now: float) -> dict[str, int]:
        """Delete records past their retention: forecasts; plans with their actions; pod steers no
        longer pending and recorded risk-adaptation steps of workloads this process (its shard) has
        no policy for (after the plans' retention); and the checkpoints of model versions no one
        can need (``Store.prune_model_checkpoints``), with their files in the artifact folder: each
        file first, then its stored copy; a file that cannot be deleted is logged
        (``checkpoint_file_not_deleted``) and its version keeps its stored copy until a later prune
        deletes both (``checkpoint_files_not_deleted`` in the result counts them). Also, without a
        database too, the history cache files not written for longer than their window
        (``history_cache_files``: workloads removed while the daemon was down)."""
        caches = self._prune_history_caches()
        store = self.deps.store
        if store is None:
            return {"history_cache_files": caches} if caches else {}
        j = self.settings.jobs
        out: dict[str, int] = {"history_cache_files": caches}
        if not self._prune_may_go_on("forecasts", out):
            return out
        out["forecasts"] = store.prune_forecasts(now - j.forecast_retention_days * 86400.0)
        if not self._prune_may_go_on("outcomes", out):
            return out
        out["outcomes"] = store.prune_outcomes(now - j.outcome_retention_days * 86400.0)
        if not self._prune_may_go_on("plans", out):
            return out
        out["plans"], out["actions"] = store.prune_plans(now - j.plan_retention_days * 86400.0)
        if not self._prune_may_go_on("steers", out):
            return out
        out["steers"] = store.prune_steers(now - j.plan_retention_days * 86400.0)
        if not self._prune_may_go_on("risk_factors", out):
            return out
        # A service's step is written only when it moves: one with a policy keeps it however old.
        ours = {p.workload.key for p in self.deps.policies}
        owns = self.deps.risk.owns
        out["risk_factors"] = store.prune_risk_factors(
            now - j.plan_retention_days * 86400.0, lambda key: key in ours or not owns(key)
        )
        if not self._prune_may_go_on("checkpoints", out):
            return out
        with self._trials_lock:
            in_use = [r.model_version_id for _, r in self.trials.values()]
        if self.deps.model_version_id is not None:
            in_use.append(self.deps.model_version_id)
        files, kept = 0, 0
        folder = self.artifact_dir.resolve() if self.artifact_dir is not None else None

        def remove_file(model_id: int, artifact_path: str) -> bool:
            """Delete a pruned version's checkpoint file when it lies in our artifact folder; False
            when it could not be deleted (the version then keeps its stored copy: tried again next time)."""
            nonlocal files, kept
            path = Path(artifact_path) if artifact_path else None
            try:
                if folder is None or path is None or path.resolve().parent != folder or not path.is_file():
                    return True  # not a file of ours, or gone already
                path.unlink()
            except FileNotFoundError:
                return True
            except OSError as exc:
                kept += 1
                log.warning(
                    "the checkpoint file %s of model version %d could not be deleted (%s); the version keeps its "
                    "checkpoint in the database and the next prune tries again",
                    path,
                    model_id,
                    exc.strerror or exc,
                    extra={"event": "checkpoint_file_not_deleted", "model_version_id": model_id, "path": str(path)},
                )
                return False
            files += 1
            return True

        pruned = store.prune_model_checkpoints(
            now - j.model_retention_days * 86400.0, j.keep_retired_models, now, in_use=in_use, remove_file=remove_file
        )
        out.update(checkpoints=len(pruned), checkpoint_files=files, checkpoint_files_not_deleted=kept)
        # A file that could not be deleted was named in its own warning; the count says it here too.
        log.log(logging.WARNING if kept else logging.INFO, "pruned old records", extra={"event": "prune", **out})
        return out

    def _prune_may_go_on(self, step: str, done: Mapping[str, int]) -> bool:
        """Whether the prune job may delete its next kind of record: only while this replica still
        leads (``_still_leading``). Until 2026-12-06 a prune that started while leading went on after
        the Lease was lost, deleting by this replica's view (its policies, the model versions it
        runs) beside the new leader. The local history cache files are pruned whatever the role."""
        if self._still_leading():
            return True
        log.warning(
            "prune stopped before %s: this replica no longer holds the leader Lease; the leader's next prune "
            "deletes what is left",
            step,
            extra={"event": "prune_stopped", "step": step, **done},
        )
        return False

    def _prune_history_caches(self) -> int:
        """Delete the history cache files (``--artifacts`` history-cache and training-cache) that no
        process wrote for longer than their window (``PrometheusHistory.prune_cache``): the history
        of workloads removed while the daemon was down, which ``retain`` never saw. Returns how
        many files were deleted."""
        deleted = self.history.prune_cache()
        if self.training_history is not self.deps.history:
            prune = getattr(self.training_history, "prune_cache", None)
            deleted += int(prune()) if callable(prune) else 0
        return deleted

    # -- the ticker ------------------------------------------------------------------------------
    def run(
        self, stop: Callable[[], bool], sleep: Callable[[float], object] | None = None, max_ticks: int | None = None
    ) -> int:
        """Tick until ``stop()``; returns the number of ticks. ``sleep`` may wake early on shutdown."""
        interval = self.settings.loop.interval_s
        sleeper = sleep or self.clock.sleep
        next_tick = self.clock.now()
        ticks = 0
        while not stop() and (max_ticks is None or ticks < max_ticks):
            now = self.clock.now()
            lateness = max(0.0, now - next_tick)
            if lateness > interval:  # more than a whole interval behind: skip missed ticks, do not burst
                next_tick = now
            try:
                self.tick(now, lateness)
                self.cycle_backoff = 0.0
            except Exception as exc:  # noqa: BLE001 - the daemon must keep going
                self.metrics.cycles.labels(result="error").inc()
                self.cycle_backoff = min(self.settings.loop.max_backoff_s, max(interval, self.cycle_backoff * 2))
                unreachable = self._database_unreachable(exc)
                self.health.set_ready(False, f"last cycle failed: {unreachable or f'{type(exc).__name__}: {exc}'}")
                if unreachable:  # foreseeable (the server down, restarting, the network): what to do, no traceback
                    log.error(
                        "cycle failed: %s; backing off %.0f s (the cycle is retried then; actions a failed cycle "
                        "left 'planned' are reconciled once the database answers)",
                        unreachable,
                        self.cycle_backoff,
                        extra={"event": "cycle_failed", "backoff_s": self.cycle_backoff, "cause": "database"},
                    )
                else:
                    log.exception(
                        "cycle failed; backing off %.0f s",
                        self.cycle_backoff,
                        extra={"event": "cycle_failed", "backoff_s": self.cycle_backoff},
                    )
            ticks += 1
            next_tick += interval + self.cycle_backoff
            if next_tick - self.clock.now() > interval + self.cycle_backoff:
                # The wall clock stepped back (NTP) during the cycle or before it: the old schedule
                # would stop the loop for as long as the step, while /healthz stayed live. One
                # interval (and back-off) from now, on the new clock.
                next_tick = self.clock.now() + interval + self.cycle_backoff
            self.health.schedule(next_tick)
            if stop() or (max_ticks is not None and ticks >= max_ticks):
                break
            sleeper(max(0.0, next_tick - self.clock.now()))
        return ticks

    def _database_unreachable(self, exc: BaseException) -> str:
        """What to say when ``exc`` is the database's operational error (the server down or
        restarting, the network, a SQLite file that cannot be written): "cannot reach or write the
        database URL (password hidden): reason. What to do", as docs/storage.md words it; ``""`` for
        any other error (logged with its traceback)."""
        if not isinstance(exc, OperationalError | InterfaceError):
            return ""
        from storage.store import _hide_password

        url = str(getattr(self.deps.store, "url", "") or "")
        shown = _hide_password(url) if url else "(the configured database)"
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split()).rstrip(". ")
        if url:
            reason = _hide_password(reason, url)
        return (
            f"Cannot reach or write the database {shown}: {reason}. Check that the server is running and "
            "reachable from this pod (and has disk space), and the URL (--db, storage.url) is right"
        )

    #: How long ``shutdown`` waits for a running job (a retrain takes minutes): within the pod's
    #: ``terminationGracePeriodSeconds`` (60 s), so the process still exits 0 on its own.
    SHUTDOWN_JOB_WAIT_S = 40.0

    def shutdown(self, job_wait_s: float | None = None) -> bool:
        """Graceful stop: cancel queued jobs, wait for a running one at most ``job_wait_s`` (default
        ``SHUTDOWN_JOB_WAIT_S``), then release the lease (a standby takes over now, not after the
        lease runs out) and close the store. A job finishing during the wait writes its result only
        while the Lease is still held as of the last renewal (the ticks have stopped: one
        ``lease_duration_s``); after that, and after the release, it is dropped (``_still_leading``).
        Until 2026-12-06 the lease went first, and a retraining that finished during the wait still
        registered its model and rollout while the successor led. Returns False when a job was
        still running: it is abandoned (a retrain records its model version and rollout in single
        transactions, so nothing half-written is left; the work is lost) and the caller should exit
        without waiting for its thread (``scaleahead run`` does)."""
        finished = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            wait_s = self.SHUTDOWN_JOB_WAIT_S if job_wait_s is None else job_wait_s
            running = [(j.name, j.future) for j in self.jobs.jobs.values() if j.future and not j.future.done()]
            deadline = time.monotonic() + wait_s
            for name, future in running:
                try:
                    future.result(timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    finished = False
                    log.warning(
                        "job %s still running after %.0f s of shutdown: abandoned (nothing it half-wrote is "
                        "kept; it runs again when next due)",
                        name,
                        wait_s,
                        extra={"event": "job_abandoned", "job": name},
                    )
                except Exception:  # noqa: BLE001, S110 - its failure was logged by the job runner
                    pass
        self._giving_up = True  # an abandoned job's result is dropped from now on, before a successor leads
        try:
            self.leadership.release()
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            log.warning("releasing the lease failed: %s", exc, extra={"event": "lease_release_failed"})
        if self.deps.store is not None and finished:
            self.deps.store.close()
        self.health.set_ready(False, "shutting down")
        log.info("stopped", extra={"event": "stopped"})
        return finished
