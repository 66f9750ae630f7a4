"""``scaleahead bench soak``: does a long-running daemon with policy churn stay bounded?

Why it exists: the daemon runs for weeks while policies come and go (a team renames a service,
a namespace is deleted). Everything it keeps per workload must go with the workload's policy, or
memory, exported metric series and per-cycle work grow with every policy ever seen. A read-only
soak audit measured this once with throwaway scripts (a ``Daemon`` on a virtual clock, policies
replaced every few hundred cycles, sizes printed every 500 cycles); this module is that audit as
a product benchmark, so the numbers in docs/benchmarks.md ("Soak") can be made again.

The setup (deterministic apart from RSS and time):

- a real ``scaleahead.daemon.Daemon`` on a ``VirtualClock`` starting 3 days into the real
  ``nasa-10s`` trace, one tick every 10 virtual seconds (``loop.interval_s``), jobs run inline on
  that clock (``background_jobs`` off): retraining on drift and at 03:00, the accuracy report every
  hour (``0 * * * *``), ``prune`` every 30 minutes (``*/30 * * * *``) with the retentions given
  (``forecast_retention_h``, ``plan_retention_h``: short, so prune has work);
- ``forecast.model`` ``seasonal_naive`` (fast: a cycle is a few ms, so thousands of cycles run in
  a minute; a learned model would measure the model, not the daemon's bookkeeping);
- history: ``TraceHistory`` with one distinct series per workload slot (``spread_series``: the
  real trace scaled and shifted by whole hours), 1.2 days per read; an ``InMemoryTarget``;
- a ``Store`` in a temporary SQLite file, or ``db_url``;
- ``workloads`` stable policies (namespace ``shop``) and ``churn`` policies that are replaced
  every ``churn_every`` cycles by new ones under new names in a new namespace (``churnE``,
  ``E`` the epoch), read by the daemon through a ``policy_source`` every 30 s as ``run`` reads
  them in a cluster. The actions of the last churning workload fail (an injected error), so the
  per-workload back-off and the ``scaleahead_workload_errors_total`` counter are exercised. The
  removed workloads' Deployments are deleted from the in-memory cluster and their series from the
  history (both are the benchmark's own stand-ins for the cluster and Prometheus).

Every ``sample_every`` cycles a sample is taken (after ``gc.collect()``): RSS and peak RSS
(``/proc/self/status`` VmRSS and VmHWM, kB), open file descriptors, threads, exported metric
series (sample lines of ``Metrics.render()``) and those naming a removed workload, the sizes of
the per-workload structures (``STRUCTURES``), rows per database table and the median cycle ms
since the previous sample. At the end: the least-squares growth per 1,000 cycles of RSS and of
every structure over the samples after the first (the warm-up), and a verdict per structure:
``bounded`` when it never held more entries than the live policies (``workloads + churn``), else
``grows``; ``live_forgotten``, emptied by each accuracy report, is judged against the workloads
removed since the last report instead (``removed_since_report``); removed-workload metric series
must stay 0.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import func, inspect, select, table

from forecaster import make_model
from scaleahead.clock import VirtualClock
from scaleahead.daemon import RETRAINED_KEPT, Daemon
from scaleahead.loop import Deps
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget, TraceHistory, spread_series
from storage import Store

DAY = 86400.0
TRACE = "nasa-10s"
MODEL = "seasonal_naive"
INTERVAL_S = 10.0
POLICY_RELOAD_S = 30.0
PRUNE_CRON = "*/30 * * * *"
REPORT_CRON = "0 * * * *"


def _size(d: Daemon, history: TraceHistory) -> dict[str, int]:
    live, risk, startup = d.live, d.deps.risk, d.deps.startup
    return {
        "backoff": len(set(d.backoff.failures) | set(d.backoff.until)),
        "recent": len(d.target.recent),
        "live_pending": len(live.pending),
        "live_last_sample": len(live.last_sample),
        "live_error": len(live.error),
        "live_daily": len(live.daily),
        "live_forgotten": len(live._forgotten),
        "outcome_sums": len(d.outcomes),
        "outcome_last_scored": len(d.outcomes.last_scored),
        "shadow_pending": len(d.shadow_live.pending),
        "startup_cache": len(startup._cache),
        "startup_kept": len(startup._kept),
        "risk_adapters": len(risk._adapters),
        "risk_adapted": len(risk._adapted),
        "risk_restored": len(risk._restored),
        "risk_unsaved": len(risk.unsaved),
        "by_workload": len(d._by_workload),
        "unread_last": len(d.deps.unread.last),
        "orphans": len(d._orphans),
        "history_series": len(history.series),
        "retrained": len(d.retrained),
        "reports": len(d.reports),
    }


#: What each structure is (the soak audit's list); every one is judged against the live policies.
STRUCTURES = {
    "backoff": "Daemon.backoff: failures and back-off ends per workload key",
    "recent": "Daemon.target.recent: recent decisions per workload (scale-down stabilization)",
    "live_pending": "LiveError.pending: sampled forecasts waiting to be scored",
    "live_last_sample": "LiveError.last_sample: when each workload's forecast was last sampled",
    "live_error": "LiveError.error: live WAPE per workload",
    "live_daily": "LiveError.daily: the accuracy report's counts per workload",
    "live_forgotten": "LiveError._forgotten: keys removed since the last accuracy report (reset by each report)",
    "outcome_sums": "OutcomeBook.sums: measured outcomes not yet written, per workload, open bucket and arm",
    "outcome_last_scored": "OutcomeBook.last_scored: when each workload's outcome was last scored",
    "shadow_pending": "Daemon.shadow_live.pending: a shadow challenger's sampled forecasts waiting to be scored",
    "startup_cache": "StartupBook._cache: start-up estimates per policy object",
    "startup_kept": "StartupBook._kept: kept readiness times per workload",
    "risk_adapters": "RiskBook._adapters: sloRisk adapters per workload",
    "risk_adapted": "RiskBook._adapted: adapted policies per workload",
    "risk_restored": "RiskBook._restored: stored steps restored per workload key",
    "risk_unsaved": "RiskBook.unsaved: steps not yet written per workload key",
    "by_workload": "Daemon._by_workload: policy per workload",
    "unread_last": "Deps.unread.last: each workload's pods as last read",
    "orphans": "Daemon._orphans: managed functions without a policy",
    "history_series": "TraceHistory.series: the benchmark's history, one series per live workload",
    "retrained": "Daemon.retrained: one entry per retraining (not per workload; the last RETRAINED_KEPT kept)",
    "reports": "Daemon.reports: one path per accuracy report written (not per workload; the last RETRAINED_KEPT kept)",
}

#: Structures that are not per workload: each keeps at most ``RETRAINED_KEPT`` entries.
PER_PROCESS = ("retrained", "reports")

_WORKLOAD = re.compile(r'workload="([^"]*)"')


def _policy(name: str, namespace: str) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "target": {"name": name, "namespace": namespace},
                "demand": {"query": f'sum(rate(http_requests_total{{deployment="{name}"}}[1m]))', "unit": "req/10s"},
                "capacityPerReplica": 2,
                "maxReplicas": 60,
                "maxStepUp": 20,
            },
        }
    )


def rss_kb() -> tuple[int, int]:
    """The process's resident set and its peak (kB), from /proc/self/status (0 where there is none)."""
    rss = hwm = 0
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def db_rows(store: Store) -> dict[str, int]:
    """Rows per table of the store's database."""
    engine = store.engine
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for name in sorted(inspect(engine).get_table_names()):
            out[name] = int(conn.execute(select(func.count()).select_from(table(name))).scalar_one())
    return out


def slope_per_1000(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs``, times 1,000; None with fewer than two points."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if den == 0:
        return None
    return round(1000.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den, 3)


def bench_soak(
    *,
    cycles: int,
    workloads: int,
    churn: int,
    churn_every: int,
    sample_every: int,
    forecast_retention_h: float,
    plan_retention_h: float,
    db_url: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the soak (module docstring); returns ``{"params", "samples", "summary"}``."""
    import logging

    nasa = load_series(TRACE)
    t0 = nasa.start + 3 * DAY
    slots = spread_series(nasa, workloads + churn, seed=0)
    stable = [_policy(f"stable{i}", "shop") for i in range(workloads)]
    current: dict[str, list[Policy]] = {}
    history = TraceHistory(window_s=1.2 * DAY)
    target = InMemoryTarget()

    def churn_to(epoch: int) -> None:
        churners = [_policy(f"w{epoch}x{i}", f"churn{epoch}") for i in range(churn)]
        gone = {p.workload for p in current.get("churn", [])}
        for ref in gone:  # the cluster deletes the old Deployments, Prometheus stops their series
            target.replicas.pop(ref, None)
            target.warm.pop(ref, None)
            history.series.pop(ref.key, None)
        for i, p in enumerate(churners):
            history.series[p.workload.key] = slots[workloads + i]
        current["churn"] = churners
        # one churning workload's actions fail: back-off and the workload error counter get work
        target.fail = {churners[-1].workload.key} if churners else set()

    for i, p in enumerate(stable):
        history.series[p.workload.key] = slots[i]
    churn_to(0)

    def source() -> list[Policy]:
        return stable + current["churn"]

    settings = Settings()
    settings.forecast.model = MODEL
    settings.loop.interval_s = INTERVAL_S
    settings.jobs.forecast_retention_days = forecast_retention_h / 24.0
    settings.jobs.outcome_retention_days = forecast_retention_h / 24.0  # measured outcomes: as the forecasts
    settings.jobs.plan_retention_days = plan_retention_h / 24.0
    settings.jobs.prune_cron = PRUNE_CRON
    settings.jobs.report_cron = REPORT_CRON

    tmp = Path(tempfile.mkdtemp(prefix="scaleahead-soak-"))
    try:
        store = Store(db_url or f"sqlite:///{tmp / 'soak.db'}")
    except BaseException:  # an unusable --db: nothing of the run is left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    clock = VirtualClock(t0)
    fitted = make_model(MODEL).fit([nasa.between(nasa.start, t0)])
    deps = Deps(history, fitted, target, store, source())
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the injected failures and retrainings log every cycle
    daemon: Daemon | None = None
    samples: list[dict[str, Any]] = []
    removed: dict[str, float] = {}  # workload key -> when the benchmark removed its policy
    try:
        (tmp / "reports").mkdir()
        daemon = Daemon(
            deps,
            settings,
            clock,
            training_history=history,
            policy_source=source,
            policy_reload_s=POLICY_RELOAD_S,
            artifact_dir=tmp / "models",
            report_dir=tmp / "reports",
        )
        epoch = 0
        window: list[float] = []
        for cycle in range(1, cycles + 1):
            if cycle % churn_every == 0:
                removed.update((p.workload.key, clock.now()) for p in current["churn"])
                epoch += 1
                churn_to(epoch)
            a = time.perf_counter()
            daemon.tick(clock.now())
            window.append((time.perf_counter() - a) * 1000.0)
            target.applied.clear()  # the in-memory cluster's own log of every action
            clock.sleep(INTERVAL_S)
            if cycle % sample_every == 0 or cycle == 1:
                gc.collect()
                rss, hwm = rss_kb()
                lines = [ln for ln in daemon.metrics.render().decode().splitlines() if ln and not ln.startswith("#")]
                # the daemon reads the policies every 30 s: a policy removed since is still live there
                live_keys = {p.workload.key for p in daemon.deps.policies}
                gone = set(removed) - live_keys
                stale = sum(1 for ln in lines if (m := _WORKLOAD.search(ln)) and m.group(1) in gone)
                # keys removed since the last accuracy report (the reload may come up to 30 s after it)
                since = daemon.report_since - POLICY_RELOAD_S - INTERVAL_S
                recent_removed = sum(1 for k, t in removed.items() if k in gone and t >= since)
                row: dict[str, Any] = {
                    "cycle": cycle,
                    "virtual_h": round((clock.now() - t0) / 3600.0, 1),
                    "live_policies": len(live_keys),
                    "removed_workloads": len(gone),
                    "removed_since_report": recent_removed,
                    "rss_kb": rss,
                    "peak_rss_kb": hwm,
                    "fds": open_fds(),
                    "threads": threading.active_count(),
                    "metric_series": len(lines),
                    "metric_series_removed": stale,
                    "cycle_ms_median": round(statistics.median(window), 3),
                    "sizes": _size(daemon, history),
                    "db_rows": db_rows(store),
                }
                window = []
                samples.append(row)
                if progress is not None:
                    progress(row)
    finally:
        if daemon is not None:
            daemon.shutdown()
        store.close()
        logging.disable(previous)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "params": {
            "cycles": cycles,
            "workloads": workloads,
            "churn": churn,
            "churn_every": churn_every,
            "sample_every": sample_every,
            "trace": TRACE,
            "model": MODEL,
            "interval_s": INTERVAL_S,
            "policy_reload_s": POLICY_RELOAD_S,
            "prune_cron": PRUNE_CRON,
            "report_cron": REPORT_CRON,
            "forecast_retention_h": forecast_retention_h,
            "plan_retention_h": plan_retention_h,
            "db": "temporary SQLite file" if db_url is None else "--db",
        },
        "samples": samples,
        "summary": summarize(samples, workloads + churn),
    }


def summarize(samples: list[dict[str, Any]], live: int) -> dict[str, Any]:
    """Growth per 1,000 cycles after the first sample, and a verdict per structure."""
    after = samples[1:]
    xs = [float(s["cycle"]) for s in after]
    growth: dict[str, float | None] = {
        "rss_kb": slope_per_1000(xs, [float(s["rss_kb"]) for s in after]),
        "metric_series": slope_per_1000(xs, [float(s["metric_series"]) for s in after]),
    }
    verdicts: dict[str, dict[str, Any]] = {}
    for name in STRUCTURES:
        growth[name] = slope_per_1000(xs, [float(s["sizes"][name]) for s in after])
        if name == "live_forgotten":  # reset by each accuracy report: judged against the keys removed since
            over = [s for s in samples if s["sizes"][name] > s["removed_since_report"]]
            bound: int | str = "removed_since_report"
        elif name in PER_PROCESS:  # not per workload: kept up to a fixed number
            over = [s for s in samples if s["sizes"][name] > RETRAINED_KEPT]
            bound = RETRAINED_KEPT
        else:
            over = [s for s in samples if s["sizes"][name] > live]
            bound = live
        top = max(s["sizes"][name] for s in samples)
        verdicts[name] = {"max": top, "bound": bound, "verdict": "grows" if over else "bounded"}
    top = max(s["metric_series_removed"] for s in samples)
    verdicts["metric_series_removed"] = {"max": top, "bound": 0, "verdict": "bounded" if top == 0 else "grows"}
    return {
        "live_policies": live,
        "growth_per_1000_cycles": growth,
        "verdicts": verdicts,
        "grows": sorted(k for k, v in verdicts.items() if v["verdict"] == "grows"),
    }
