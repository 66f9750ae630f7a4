"""Measured outcomes: what each service got from the control loop, for rollouts decided on them.

A canary or A/B rollout promotes or rolls back on each workload's outcome under the arm that acted
for it (``actuator.rollouts``). Until 2026-12-06 those outcomes had to be measured elsewhere and
given to ``scaleahead rollout evaluate`` as a CSV; now the daemon's leader measures them itself:

- every control cycle, per service with a readable state and a fresh demand sample (at most three
  control intervals or history steps old, whichever is longer): one scored step, short when the
  demand is above ``capacityPerReplica`` times the ready replicas (../shared/EVALUATION.md's
  violation), the capacity it ran (``capacityPerReplica`` x replicas x the time since the
  workload's last step, at most three intervals) and the demand (x that time);
- every forecast the live error scores (``scaleahead.daemon.LiveError``: one per workload per 5
  minutes, once its horizon has passed): its absolute error and the demand that came, in the
  bucket of its origin;

summed per workload, 5-minute bucket (``BUCKET_S``, aligned to the epoch), rollout and arm, and
written once a bucket has ended (``Store.record_outcomes``; scored forecasts as they come).
``measured_outcomes`` turns the rows of a rollout's window into the ``Outcome`` per workload that
``RolloutBook.evaluate`` compares (``decide_on_measured``), each with its baseline on the champion:
the same hours of an earlier day, else the window before the rollout started. Functions (warm
pools) are not measured here: a cold start is not something the loop observes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from scaleahead.policy import Policy, WorkloadClass
from scaleahead.types import F32_MAX, ClusterState, Series, WorkloadRef

if TYPE_CHECKING:
    from actuator.rollouts import Outcome
    from storage.store import Store, StoredRollout

#: Length of an outcome bucket (s); buckets start at multiples of it (epoch time).
BUCKET_S = 300.0

#: Baselines come from the same hours this many seconds (whole multiples) before the window: a day.
BASELINE_PERIOD_S = 86400.0

#: A workload counts in a window (and a baseline) only when its scored steps cover at least this
#: share of it: an outage of the loop, of Prometheus or of the database is not a measurement.
MIN_COVERAGE = 0.8

#: A demand sample older than this many control intervals (or history steps) is not scored.
FRESH_STEPS = 3.0

#: Which rollout and arm acted for a workload this cycle: ``(rollout id, arm, model version)``;
#: rollout id 0 when none covered it.
ArmOf = tuple[int, str, int | None]
NO_ROLLOUT: ArmOf = (0, "champion", None)


@dataclass
class _Sums:
    steps: int = 0
    seconds: float = 0.0
    short_steps: int = 0
    fallback_steps: int = 0
    capacity_seconds: float = 0.0
    demand_seconds: float = 0.0
    error_abs: float = 0.0
    error_actual: float = 0.0
    forecasts: int = 0


#: The summed columns of an outcome row (``_Sums``'s fields, ``OutcomeRow``'s counts and seconds).
SUMMED = tuple(f.name for f in fields(_Sums))


def bucket_of(t: float) -> float:
    return math.floor(t / BUCKET_S) * BUCKET_S


def fresh_demand(series: Series | None, now: float, interval_s: float) -> float | None:
    """The newest finite sample of ``series`` whose step ended by ``now`` (``Series.known_by``) if it
    is at most ``FRESH_STEPS`` control intervals (or history steps) old, else None. Until 2026-12-07
    a sample stamped at ``now``, whose step had only begun, was read too (no-peeking audit; the
    loop's history sources hold none, so no measurement changed)."""
    if series is None or len(series) == 0:
        return None
    limit = FRESH_STEPS * max(interval_s, series.step_s)
    # only the samples at most ``limit`` old (the history holds a day or more: 8,640+ per workload)
    stop = min(len(series), int(math.floor((now - series.start) / series.step_s + 1e-9)))
    first = max(0, int(math.ceil((now - limit - series.start) / series.step_s - 1e-9)))
    if stop <= first:
        return None
    tail = series.values[first:stop]
    # a sample beyond float32 (an exporter's 1e308 glitch) is missing, as everywhere the loop reads history
    ok = np.flatnonzero(np.isfinite(tail) & (tail >= 0) & (tail <= F32_MAX))
    if ok.size == 0:
        return None
    return float(tail[ok[-1]])


class OutcomeBook:
    """Per workload, bucket, rollout and arm: the sums not yet written (see the module's doc).

    ``step`` and ``score`` run on the loop's thread; ``take`` too (the daemon writes after a
    cycle). A lock keeps a score from another thread consistent all the same."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, float, int, str, int | None], _Sums] = {}
        #: When each workload was last scored (the time its next step stands for starts there).
        self.last_scored: dict[str, float] = {}
        self._lock = threading.Lock()

    def step(
        self,
        policies: Sequence[Policy],
        state: ClusterState,
        history: Mapping[WorkloadRef, Series],
        now: float,
        interval_s: float,
        arms: Mapping[WorkloadRef, ArmOf],
        fallbacks: Collection[WorkloadRef] = (),
    ) -> int:
        """Score one control cycle at ``now`` (each service's state as read this cycle, the demand
        history read this cycle, the arm it is in; ``fallbacks``: those whose arm's model made no
        forecast for it, so the policy's fallback acted). Returns how many were scored."""
        bucket = bucket_of(now)
        scored = 0
        with self._lock:
            for p in policies:
                if p.spec.workload_class != WorkloadClass.SERVICE:
                    continue
                ref = p.workload
                ws = state.workloads.get(ref)
                if ws is None or ref in state.unreadable:
                    continue
                demand = fresh_demand(history.get(ref), now, interval_s)
                if demand is None:
                    continue
                c = float(p.spec.capacity_per_replica)
                rid, arm, version = arms.get(ref, NO_ROLLOUT)
                # the time this step stands for: since the workload's last scored step (cycles that
                # run longer than the interval cover more), at most FRESH_STEPS intervals (a gap is
                # not measured time)
                last = self.last_scored.get(ref.key)
                dt = interval_s if last is None or not now > last else min(now - last, FRESH_STEPS * interval_s)
                self.last_scored[ref.key] = now
                s = self.sums.setdefault((ref.key, bucket, rid, arm, version), _Sums())
                s.steps += 1
                s.seconds += dt
                s.short_steps += int(demand > c * max(0, ws.ready_replicas))
                s.fallback_steps += int(ref in fallbacks)
                s.capacity_seconds += c * max(0, ws.replicas) * dt
                s.demand_seconds += demand * dt
                scored += 1
        return scored

    def score(self, key: str, origin: float, arm_of: ArmOf, error_abs: float, actual: float) -> None:
        """A forecast made at ``origin`` for workload ``key`` by ``arm_of`` was scored: its absolute
        error and the demand that came, summed over its steps."""
        if not (math.isfinite(error_abs) and math.isfinite(actual)):
            return
        rid, arm, version = arm_of
        with self._lock:
            s = self.sums.setdefault((key, bucket_of(origin), rid, arm, version), _Sums())
            s.error_abs += error_abs
            s.error_actual += actual
            s.forecasts += 1

    def take(self, now: float) -> list[dict[str, Any]]:
        """The rows to write: every bucket that has ended by ``now`` (scored forecasts of older
        buckets come as rows of their own), removed from the book."""
        rows: list[dict[str, Any]] = []
        with self._lock:
            for key in [k for k in self.sums if k[1] + BUCKET_S <= now]:
                workload, bucket, rid, arm, version = key
                rows.append(
                    {
                        "workload": workload,
                        "bucket": bucket,
                        "rollout_id": rid,
                        "arm": arm,
                        "model_version_id": version,
                        **asdict(self.sums.pop(key)),
                    }
                )
        return rows

    def put_back(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Rows ``take`` gave that could not be written: kept for the next try."""
        with self._lock:
            for r in rows:
                key = (r["workload"], r["bucket"], r["rollout_id"], r["arm"], r["model_version_id"])
                s = self.sums.setdefault(key, _Sums())
                for f in SUMMED:
                    setattr(s, f, getattr(s, f) + r[f])

    def forget(self, keys: set[str]) -> None:
        """Drop what is kept for the workloads ``keys`` (their policies were removed)."""
        with self._lock:
            for k in [k for k in self.sums if k[0] in keys]:
                del self.sums[k]
            for key in keys & set(self.last_scored):
                del self.last_scored[key]

    def __len__(self) -> int:
        return len(self.sums)


def outcome_of(workload: str, sums: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> Outcome:
    """An ``Outcome`` from summed rows (``Store.outcome_sums``), with ``baseline``'s as its baseline."""
    from actuator.rollouts import Outcome

    def metrics(d: Mapping[str, Any] | None) -> tuple[float, float, float]:
        if d is None:
            return math.nan, math.nan, math.nan
        steps, demand, actual = d["steps"], d["demand_seconds"], d["error_actual"]
        return (
            d["short_steps"] / steps if steps > 0 else math.nan,
            d["capacity_seconds"] / demand if steps > 0 and demand > 0 else math.nan,
            d["error_abs"] / actual if d["forecasts"] > 0 and actual > 0 else math.nan,
        )

    return Outcome(workload, *metrics(sums), *metrics(baseline))


@dataclass(frozen=True)
class MeasuredWindow:
    """What ``measured_outcomes`` compared: the window (``start``: its first whole bucket), its
    baseline windows, and what it left out."""

    start: float
    end: float
    baseline_start: float
    baseline_end: float
    #: Workloads whose rows in the window name another arm than the rollout assigns them now
    #: (the loop follows a new share within a minute): those rows are left out.
    other_arm: tuple[str, ...] = ()
    #: The same hours of an earlier day.
    day_before_start: float = math.nan
    day_before_end: float = math.nan
    #: Which baselines were used, for every workload: ``day_before`` or ``before_start``
    #: (``baseline_start`` .. ``baseline_end``); and how many workloads had one there.
    baseline: str = "before_start"
    baselines: int = 0
    #: Workloads measured for less than ``MIN_COVERAGE`` of the window (the loop or the database
    #: down, no fresh demand, a workload backing off): left out.
    under_measured: tuple[str, ...] = ()
    #: The rollout group's workloads per arm (``assigned``, or those recorded under the rollout).
    assigned: Mapping[str, int] = field(default_factory=dict)
    #: Per arm, the share of its scored steps in which its model made no forecast (NaN: none scored).
    fallback_share: Mapping[str, float] = field(default_factory=dict)


def window_start(rollout: StoredRollout) -> float:
    """Since when the rollout's current share has been in force: its start, a canary's last advance
    or last inconclusive window (as ``RolloutBook.evaluate`` counts its window)."""
    history = rollout.results.get("history", []) if isinstance(rollout.results, Mapping) else []
    if rollout.mode == "canary":
        for h in reversed(history):
            if h.get("decision") == "advance" or h.get("inconclusive"):
                return float(h["at"])
    return float(rollout.started_at)


def _champion_sums(store: Store, start: float, end: float, workloads: set[str]) -> dict[str, dict[str, Any]]:
    """Per workload, the summed rows of ``[start, end)`` on the champion arm (any rollout, or none),
    of the workloads measured for at least ``MIN_COVERAGE`` of that time."""
    base: dict[str, dict[str, Any]] = {}
    for d in store.outcome_sums(start, end, workloads=workloads):
        if d["arm"] != "champion":
            continue  # another rollout's challenger acted then: not the champion's outcome
        acc = base.setdefault(d["workload"], dict.fromkeys(SUMMED, 0))
        for k in SUMMED:
            acc[k] += d[k]
    return {w: d for w, d in base.items() if d["seconds"] >= MIN_COVERAGE * (end - start)}


def measured_outcomes(
    store: Store,
    rollout: StoredRollout,
    now: float,
    baseline_s: float | None = None,
    assigned: Collection[str] | None = None,
) -> tuple[dict[str, list[Outcome]], MeasuredWindow]:
    """Each workload's measured outcome in ``rollout``'s arms over its current window, with its
    baseline on the champion.

    The window: whole buckets from the first that starts at or after ``window_start``; for a canary
    its ``window_s`` of them (what the decision is about: an evaluation hours late does not judge
    the hours after the window), for A/B and shadow up to ``now``. A workload counts when its
    scored steps cover ``MIN_COVERAGE`` of that window. The baselines, one kind for every workload
    (mixing kinds could differ by arm: a challenger version that ran yesterday too has no
    champion rows then for the workloads it had):

    - **the same hours of an earlier day** (``BASELINE_PERIOD_S``): the window moved back by whole
      days until it ends before the rollout started, so a workload's daily rhythm (busy at noon,
      idle at night) is not taken for a difference between the models; used when at least
      ``min_workloads_per_arm`` workloads of each arm were measured then (the others have none);
    - else the ``baseline_s`` (default: the canary's ``window_s``, 3600 s) right before the
      rollout started.

    ``assigned``: the workloads of the rollout's group (the daemon's policies); default: those
    recorded under this rollout since it started. ``MeasuredWindow.assigned`` counts them per arm,
    so a caller can tell a small group from an outage. Shadow: the champion's outcomes in both
    arms' rows, the challenger's forecast error only (it does not act)."""
    from actuator.rollouts import CanaryParams, assign

    params = CanaryParams.from_stored(rollout.params)
    need = max(2, params.min_workloads_per_arm)
    start = window_start(rollout)
    first = math.ceil(start / BUCKET_S) * BUCKET_S
    end = bucket_of(now)  # only whole buckets: the current one is still being written
    if rollout.mode == "canary":
        end = min(end, first + math.ceil(params.window_s / BUCKET_S - 1e-9) * BUCKET_S)
    span = float(baseline_s if baseline_s is not None else params.window_s)
    b_end = bucket_of(rollout.started_at)
    b_start = b_end - span
    salt = str(rollout.params.get("salt", ""))
    rows = store.outcome_sums(first, end, rollout_id=rollout.id)

    def arm_of(w: str) -> str:
        return "champion" if rollout.mode == "shadow" else assign(w, rollout.share, salt)

    group = (
        set(assigned)
        if assigned is not None
        else {d["workload"] for d in store.outcome_sums(bucket_of(rollout.started_at), math.inf, rollout_id=rollout.id)}
    )
    counts = {"champion": 0, "challenger": 0}
    for w in group:
        counts[arm_of(w)] += 1
    arms: dict[str, list[Outcome]] = {"champion": [], "challenger": []}
    other: list[str] = []
    short: list[str] = []
    kept: list[dict[str, Any]] = []
    steps = {"champion": 0, "challenger": 0}
    fallback = {"champion": 0, "challenger": 0}
    for d in rows:
        w, arm = d["workload"], d["arm"]
        if rollout.mode != "shadow" and arm != arm_of(w):
            other.append(w)
            continue
        forecast_only = rollout.mode == "shadow" and arm == "challenger"
        if (d["forecasts"] < 1) if forecast_only else (d["seconds"] < MIN_COVERAGE * (end - first)):
            short.append(w)  # measured for too little of the window: a part is not the whole
            continue
        kept.append(d)
        if not forecast_only:
            steps[arm] += d["steps"]
            fallback[arm] += d["fallback_steps"]
    names = {d["workload"] for d in kept}
    shift = BASELINE_PERIOD_S * max(1, math.ceil((end - b_end) / BASELINE_PERIOD_S - 1e-9))
    day_before = _champion_sums(store, first - shift, end - shift, names)
    with_day = {a: sum(1 for d in kept if d["arm"] == a and d["workload"] in day_before) for a in counts}
    # shadow: every workload is the champion's (the challenger's rows are its forecasts)
    day = (len(day_before) if rollout.mode == "shadow" else min(with_day.values())) >= need
    base = day_before if day else _champion_sums(store, b_start, b_end, names)
    for d in kept:
        arms[d["arm"]].append(outcome_of(d["workload"], d, base.get(d["workload"])))
    if rollout.mode == "shadow":
        # the challenger only forecast: its violations and cost are the champion's (not compared)
        from actuator.rollouts import Outcome

        arms["challenger"] = [
            Outcome(o.workload, math.nan, math.nan, o.forecast_error, baseline_forecast_error=o.baseline_forecast_error)
            for o in arms["challenger"]
        ]
    measured = MeasuredWindow(
        first,
        end,
        b_start,
        b_end,
        tuple(sorted(set(other))),
        first - shift,
        end - shift,
        "day_before" if day else "before_start",
        len(names & set(base)),
        tuple(sorted(set(short))),
        counts,
        {a: fallback[a] / steps[a] if steps[a] else math.nan for a in steps},
    )
    return arms, measured


def decide_on_measured(
    book: Any,
    rollout: StoredRollout,
    arms: Mapping[str, Sequence[Outcome]],
    measured: MeasuredWindow,
    now: float,
    check_promotion: Any = None,
) -> dict[str, Any]:
    """``RolloutBook.evaluate`` on ``measured_outcomes``'s arms (the daemon's canary evaluation and
    ``rollout evaluate --measured``): with enough workloads in each arm of the group, too few
    outcomes is too few *measured* (inconclusive), else a group too small for the share (as with a
    CSV); and the arms' fallback shares for the check of a challenger that did not forecast."""
    from actuator.rollouts import CanaryParams

    need = max(2, CanaryParams.from_stored(rollout.params).min_workloads_per_arm)
    return book.evaluate(  # type: ignore[no-any-return]
        rollout,
        arms,
        now,
        check_promotion=check_promotion,
        measured=min(measured.assigned.values(), default=0) >= need,
        fallback_share=measured.fallback_share,
    )
