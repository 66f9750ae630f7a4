"""``scaleahead bench canary``: canaries decided by the daemon on the outcomes it measures.

Why it exists: ``bench rollout`` scores the canary's decision rule on outcomes the replay computes;
this runs the whole path a cluster runs (docs/actuator.md, "Measured outcomes"): a real
``scaleahead.daemon.Daemon`` on a virtual clock measures every service's outcome per 5-minute
bucket and arm (``scaleahead.outcomes``), stores it in SQLite, and with ``jobs.evaluate_canaries``
decides a canary started after a baseline period, window after window, until it is promoted, rolled
back or ``max_hours`` pass. Run ``runs`` times with the challenger equal to the champion's family
(an A/A: how often an identical model is rolled back or promoted) or another family.

The setup (deterministic: every run of the same arguments decides the same):

- history: the real trace (``nasa-10s`` by default) spread over ``workloads`` series
  (``spread_series``: scaled and shifted by whole hours; seed = the run), starting
  ``3 days + run x offset_h`` into it, read 1.2 days at a time;
- the cluster: ``DelayedTarget``, the in-memory cluster with each added replica ready
  ``startup_s`` (60 s, ../shared/EVALUATION.md's L) after it is asked for; a scale-down removes
  replicas not yet ready first;
- policies: ``capacityPerReplica`` the p99 of the service's demand over the 3 days before the start
  divided by 40 (its peak needs about 40 replicas, as ../shared/EVALUATION.md sizes the replay's
  service), ``maxReplicas`` 160, ``maxStepUp`` 20, every
  one in rollout group ``run<N>`` (so each run assigns its workloads afresh: the assignment hashes
  the group and the challenger);
- the daemon: production ``champion`` (a baseline family, fitted on the history before the start;
  no retraining), ``jobs.evaluate_canaries`` on; after ``baseline_h`` the champion's family is
  registered as the champion version and the challenger as a version of family ``challenger``
  (the daemon loads both in the same minute, each fitted on the loop's history then: with one
  family for both, identical models) and a canary of it started (``steps``, ``window_s``,
  the margins given and the default alpha); the daemon follows it within a minute (a baseline family is
  fitted on the loop's history) and evaluates it on its measured outcomes.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from forecaster import make_model
from scaleahead.clock import VirtualClock
from scaleahead.loop import Deps
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget, TraceHistory, spread_series
from scaleahead.types import Action, ClusterState, ScaleTo, WorkloadRef, WorkloadState

DAY = 86400.0
INTERVAL_S = 10.0


class DelayedTarget(InMemoryTarget):
    """The in-memory cluster with a start-up delay: a replica added at t is ready at t + ``startup_s``."""

    def __init__(self, clock: VirtualClock, startup_s: float) -> None:
        super().__init__()
        self.clock = clock
        self.startup_s = startup_s
        self.pending: dict[WorkloadRef, list[float]] = {}  # ready times of replicas not ready yet

    def _pending(self, ref: WorkloadRef) -> list[float]:
        now = self.clock.now()
        left = [t for t in self.pending.get(ref, []) if t > now]
        self.pending[ref] = left
        return left

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        state = super().read_state(workloads)
        out = {}
        for ref, ws in state.workloads.items():
            ready = max(0, ws.replicas - len(self._pending(ref)))
            out[ref] = WorkloadState(ref, ws.replicas, ready, warm_instances=ws.warm_instances)
        return ClusterState(out)

    def apply(self, action: Action) -> Any:
        before = self.replicas.get(action.workload, self.default_replicas) if isinstance(action, ScaleTo) else 0
        result = super().apply(action)
        if isinstance(action, ScaleTo) and result.outcome == "applied":
            pending = self._pending(action.workload)
            added = action.to_replicas - before
            if added > 0:
                pending.extend([self.clock.now() + self.startup_s] * added)
            elif added < 0:  # the newest pending go first
                pending.sort()
                del pending[max(0, len(pending) + added) :]
        return result


#: A service's capacity per replica is the p99 of its demand over this history before the start,
#: divided by ``PEAK_REPLICAS``: its peak needs about that many replicas (../shared/EVALUATION.md's
#: replay sizes its service the same way).
SIZING_HISTORY_S = 3 * DAY
PEAK_REPLICAS = 40


def _policy(name: str, group: str, capacity: float) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {
                "target": {"name": name, "namespace": "shop"},
                "demand": {"query": f'sum(rate(http_requests_total{{deployment="{name}"}}[1m]))', "unit": "req/10s"},
                "capacityPerReplica": capacity,
                "maxReplicas": 4 * PEAK_REPLICAS,
                "maxStepUp": 20,
                "rolloutGroup": group,
            },
        }
    )


def run_canary(
    run: int,
    *,
    trace: str,
    workloads: int,
    champion: str,
    challenger: str,
    steps: tuple[float, ...],
    window_s: float,
    baseline_h: float,
    max_hours: float,
    offset_h: float,
    startup_s: float,
    margins: tuple[float, float, float] = (0.02, 0.05, 0.05),
) -> dict[str, Any]:
    """One canary (module docstring); returns its outcome, decisions and timings. ``margins``: the
    canary's violation, cost and error margins (``rollout start``'s ``--max-*-increase``)."""
    from actuator.rollouts import CanaryParams, RolloutBook
    from scaleahead.daemon import Daemon
    from storage import Store

    series = load_series(trace)
    t0 = series.start + 3 * DAY + run * offset_h * 3600.0
    group = f"run{run}"
    history = TraceHistory(window_s=1.2 * DAY)
    policies = []
    for i, s in enumerate(spread_series(series, workloads, seed=run)):
        seen = s.between(t0 - SIZING_HISTORY_S, t0).values
        p99 = float(np.nanpercentile(seen, 99)) if np.isfinite(seen).any() else 0.0
        policy = _policy(f"web{i}", group, max(p99 / PEAK_REPLICAS, 1e-3))
        policies.append(policy)
        history.series[policy.workload.key] = s
    clock = VirtualClock(t0)
    target = DelayedTarget(clock, startup_s)
    settings = Settings()
    settings.forecast.model = champion
    settings.loop.interval_s = INTERVAL_S
    settings.jobs.retrain_in_process = False
    settings.jobs.evaluate_canaries = True
    tmp = Path(tempfile.mkdtemp(prefix="scaleahead-canary-"))
    store = Store(f"sqlite:///{tmp / 'canary.db'}")
    fitted = make_model(champion).fit([s.between(s.start, t0) for s in history.series.values()])
    daemon = Daemon(Deps(history, fitted, target, store, policies), settings, clock, report_dir=tmp / "reports")
    started = time.process_time()
    try:
        ticks = 0
        for _ in range(int(baseline_h * 3600.0 / INTERVAL_S)):
            daemon.tick(clock.now())
            clock.sleep(INTERVAL_S)
            ticks += 1
        # Both arms as registered versions, loaded by the daemon in the same minute's check and
        # fitted on the same history (a baseline family is fitted on the loop's history when
        # loaded): with the same family the two are identical, a true A/A. (Production fitted at the
        # start on another span would differ from a version fitted now.)
        champion_id = store.register_model(f"{champion}-production", champion, status="champion")
        mid = store.register_model(f"{challenger}-canary", challenger, status="challenger")
        book = RolloutBook(store)
        start = clock.now()
        params = CanaryParams(
            steps=steps,
            window_s=window_s,
            max_violation_increase=margins[0],
            max_cost_increase=margins[1],
            max_error_increase=margins[2],
        )
        rid = book.start(group, "canary", str(champion_id), str(mid), start, canary=params)
        end = start + max_hours * 3600.0
        while clock.now() < end and store.rollout(rid).state == "running":
            daemon.tick(clock.now())
            clock.sleep(INTERVAL_S)
            ticks += 1
        r = store.rollout(rid)
        history_rows = list(r.results.get("history", []))
        decided = [h for h in history_rows if "level" in h or h.get("decision") != "wait"]
        return {
            "run": run,
            "group": group,
            "state": r.state,
            # the share in force when it was decided, as `bench rollout` reports it: a rollback
            # stores share 0, which said "rolled back at share 0%" whatever share it ran at
            "final_share": decided[-1]["share"] if r.state == "rolled-back" and decided else r.share,
            "hours": round((clock.now() - start) / 3600.0, 2),
            "windows": len(decided),
            "decisions": [
                {
                    "at_h": round((h["at"] - start) / 3600.0, 2),
                    "share": h["share"],
                    "decision": h["decision"],
                    "reason": h["reason"],
                    "champion_workloads": h.get("champion_workloads"),
                    "challenger_workloads": h.get("challenger_workloads"),
                    **{k: h[k] for k in h if k.endswith(("_difference", "_high", "_low", "_paired")) or k == "level"},
                }
                for h in history_rows
            ],
            # (workload, arm) pairs measured under the canary: each service in its arm(s)
            "measured_workload_arms": len(store.outcome_sums(-math.inf, rollout_id=rid)),
            "ticks": ticks,
            "cpu_s": round(time.process_time() - started, 1),
        }
    finally:
        daemon.shutdown()
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _kind(result: Mapping[str, Any]) -> str:
    if result["state"] == "promoted":
        return "promoted"
    if result["state"] == "rolled-back":
        last = str(result["decisions"][-1]["reason"]) if result["decisions"] else ""
        if last.startswith("not shown"):
            return "rolled back: not shown no worse"
        if last.startswith("too few"):
            return "rolled back: too few workloads to compare"
        return "rolled back: shown worse"
    return str(result["state"])


def bench_canary(
    runs: Sequence[int],
    progress: Callable[[dict[str, Any]], None] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """``run_canary`` for each of ``runs``; the counts of each ending."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the daemon logs every cycle
    try:
        results = []
        for run in runs:
            result = run_canary(run, **kwargs)
            result["ending"] = _kind(result)
            results.append(result)
            if progress is not None:
                progress(result)
    finally:
        logging.disable(previous)
    endings: dict[str, int] = {}
    for r in results:
        endings[r["ending"]] = endings.get(r["ending"], 0) + 1
    return {"params": {"runs": list(runs), **kwargs}, "runs": results, "endings": endings}
