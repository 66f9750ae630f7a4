"""``scaleahead bench speed``: how far one process goes (EVALUATION.md section 6).

Medians of several runs of: ``forecast_ms`` (all quantiles, 90 steps) and ``plan_ms`` for N
workloads, ``cycle_ms`` (one ``run_once``: read history from a real local Prometheus, forecast,
plan, persist to SQLite, act on an in-memory cluster; needs ``--tsdb``, else ``null``: section 6
defines it with Prometheus), ``cycle_memory_ms`` (the same cycle with history from memory),
``train_s_per_1000_series_day`` and the process's ``peak_rss_mb``.
``fetch_s`` needs the Prometheus history source; where it is not in the build the value is
``null`` and the JSON says why, never an invented number. ``plan_first_ms`` is the one plan
before those runs, the first with its policy objects: it also builds the planner's policy table
(planner/table.py), which later plans reuse.

The workloads' demand is the real NASA trace (or any trace), each workload a different window of
it (shifted by whole hours), so every series is real demand and no two are identical.
"""

from __future__ import annotations

import gc
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from forecaster import make_model
from forecaster.base import Forecaster, horizon_steps_for
from forecaster.registry import CLOCK_PERIOD_S, LEARNED
from planner import plan as make_plan
from planner.table import policy_table
from scaleahead.loop import Deps, run_once
from scaleahead.observed import demand_trends
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import ClusterState, Forecast, ScaleTo, Series, WorkloadRef, WorkloadState
from storage import Store

DAY = 86400.0


def policies_for(n: int, step_s: float) -> list[Policy]:
    """``n`` policies, one Deployment each (built once, validated by the schema)."""
    base = Policy.model_validate(
        {
            "metadata": {"name": "w0", "namespace": "bench"},
            "spec": {
                "target": {"name": "w0", "namespace": "bench"},
                "demand": {"query": "sum(rate(x[1m]))", "stepSeconds": step_s},
                "capacityPerReplica": 2.0,
                "maxReplicas": 200,
            },
        }
    )
    out = []
    for i in range(n):
        target = base.spec.target.model_copy(update={"name": f"w{i}"})
        spec = base.spec.model_copy(update={"target": target})
        meta = base.metadata.model_copy(update={"name": f"w{i}"})
        out.append(base.model_copy(update={"spec": spec, "metadata": meta}))
    return out


def workload_series(base: Series, n: int, length: int) -> list[Series]:
    """``n`` windows of ``length`` steps of one real trace, as views (no copies), shifted by hours."""
    per_hour = max(1, int(round(3600.0 / base.step_s)))
    room = len(base) - length
    if room <= 0:
        raise ValueError(f"trace {base.name} is shorter than {length} steps")
    finite = np.isfinite(base.values)
    out = []
    for i in range(n):
        off = (i * per_hour) % room
        for _ in range(room // per_hour + 1):  # skip windows that end in an outage (all missing)
            if finite[off + length - per_hour : off + length].any():
                break
            off = (off + per_hour) % room
        out.append(
            Series(f"{base.name}@{off}", base.start + off * base.step_s, base.step_s, base.values[off : off + length])
        )
    return out


#: CPU time of this process per measurement (``time.process_time``), by the same keys as the wall
#: times: on a shared machine it shows this process's own work, free of other processes' load.
CPU_MS: dict[str, dict[str, float]] = {}


#: The LSTM's training in this benchmark: 2 epochs over at most 20,000 windows (the production
#: default trains up to 30 epochs; training time scales with epochs x windows).
BENCH_LSTM = {"max_epochs": 2, "max_train_windows": 20000, "patience": 2}


def _bench_model(name: str) -> Forecaster:
    if name in LEARNED:
        from forecaster.lstm import LSTMConfig, LSTMForecaster

        clock = CLOCK_PERIOD_S if name == "lstm_clock" else 0.0
        return LSTMForecaster(LSTMConfig(**BENCH_LSTM, clock_period_s=clock))  # type: ignore[arg-type]
    return make_model(name)


def _median_ms(fn: Callable[[], object], runs: int, cpu_key: tuple[str, int] | None = None) -> float:
    times = []
    cpu = []
    for _ in range(runs):
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    if cpu_key is not None:
        CPU_MS.setdefault(cpu_key[0], {})[str(cpu_key[1])] = round(statistics.median(cpu), 3)
    return round(statistics.median(times), 3)


class _SeriesHistory:
    """A history source over prepared series (each workload its own real window)."""

    def __init__(self, by_ref: dict[WorkloadRef, Series], shift: dict[WorkloadRef, float]) -> None:
        self.by_ref = by_ref
        self.shift = shift

    def read(self, policies: Sequence[Policy], now: float) -> dict[WorkloadRef, Series]:
        out = {}
        for p in policies:
            s = self.by_ref[p.workload]
            d = self.shift[p.workload]
            part = s.between(now + d - 1.1 * DAY, now + d)
            out[p.workload] = Series(part.name, part.start - d, part.step_s, part.values, part.unit)
        return out


def _forecast_and_plan(
    trace: Series, fitted: Forecaster, n: int, context: int, h: int, runs: int
) -> tuple[float, float, float, dict[str, float]]:
    """Median forecast_ms and plan_ms for ``n`` workloads at one origin, the first plan's ms, and
    the median plan_ms when the workloads' namespace has a quota: on pods, with room for what they
    want (``plan_quota_ms``: the sums that tell nothing is short) or 10 % short of it
    (``plan_shared_ms``: every decision then goes through ``planner.fairness``); on
    ``requests.cpu`` with pods of 250m, 500m or 1 core (``plan_cpu_quota_ms``,
    ``plan_cpu_shared_ms``: shared in millicores)."""
    step = trace.step_s
    windows = workload_series(trace, n, context)
    origin = windows[0].end  # every window is re-based to end at the same "now"
    items = [
        (WorkloadRef("Deployment", "bench", f"w{i}"), Series(s.name, origin - len(s) * step, step, s.values))
        for i, s in enumerate(windows)
    ]
    out: list[Forecast] = []

    def forecast_all() -> None:
        out[:] = fitted.forecast_many(items, origin, h)

    forecast_ms = _median_ms(forecast_all, runs if n <= 1000 else max(1, runs // 2), ("forecast_ms", n))
    by_ref = {f.workload: f for f in out}
    pols = policies_for(n, step)
    # Keyed by the planner's own refs, as the control loop's state reader keys them (it reads the
    # cluster with ``policy_table(policies).refs``): dict lookups then end on identity.
    refs = policy_table(pols).refs
    assert list(refs) == [r for r, _ in items]
    # Each state with the trend its ramp floor reads (scaleahead/observed.py), as the loop gives it.
    trends = demand_trends([(s, p.spec.ramp_floor.window_seconds) for p, (_, s) in zip(pols, items, strict=True)])
    state = ClusterState(
        {
            r: WorkloadState(r, 3, 3, float(np.nan_to_num(s.values[-1])), origin, observed_trend=tr)
            for r, (_, s), tr in zip(refs, items, trends, strict=True)
        }
    )

    def plan_all() -> None:
        make_plan(by_ref, state, pols, origin, 10.0)

    # The first plan with these policy objects also reads them into the planner's policy table
    # (planner/table.py), kept for the next plans: what a cycle pays once after policies change.
    first_ms = _median_ms(plan_all, 1, ("plan_first_ms", n))
    plan_ms = _median_ms(plan_all, runs, ("plan_ms", n))
    wanted = sum(a.to_replicas for a in make_plan(by_ref, state, pols, origin, 10.0).actions if isinstance(a, ScaleTo))
    roomy = replace(state, pod_quotas={"bench": wanted})
    short = replace(state, pod_quotas={"bench": int(0.9 * wanted)})

    sizes = (250, 500, 1000)
    shapes = {r: {"requests.cpu": sizes[i % 3]} for i, r in enumerate(refs)}  # by the planner's refs too
    wanted_m = sum(
        a.to_replicas * sizes[i % 3]
        for i, a in enumerate(make_plan(by_ref, state, pols, origin, 10.0).actions)
        if isinstance(a, ScaleTo)
    )
    cpu_roomy = replace(state, resource_quotas={"bench": {"requests.cpu": wanted_m}}, pod_shapes=shapes)
    cpu_short = replace(cpu_roomy, resource_quotas={"bench": {"requests.cpu": int(0.9 * wanted_m)}})
    extra: dict[str, float] = {}
    for key, st in (
        ("plan_quota_ms", roomy),
        ("plan_shared_ms", short),
        ("plan_cpu_quota_ms", cpu_roomy),
        ("plan_cpu_shared_ms", cpu_short),
    ):
        extra[key] = _median_ms(partial(make_plan, by_ref, st, pols, origin, 10.0), runs, (key, n))
    return forecast_ms, plan_ms, first_ms, extra


def prometheus_cycle(tsdb: Path, n: int, model: str, runs: int, db_dir: Path) -> dict[str, Any]:
    """``fetch_s`` and ``cycle_ms`` with history from a real local Prometheus (section 6 exactly).

    Uses the fetch bench's TSDB (``scaleahead.bench.prometheus``: ``n`` real NASA series x 1 day +
    1 hour, backfilled once with promtool). The first cycle is the cold load (``fetch_s`` is timed
    separately by ``run_fetch_bench``); the next ``runs`` cycles, 120 s apart so that each also
    writes its forecasts, read only new points.
    """
    from scaleahead.bench.prometheus import bench_policies, ensure_tsdb, free_port, run_fetch_bench
    from scaleahead.prometheus.backfill import LocalPrometheus
    from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig
    from scaleahead.prometheus.history import PrometheusHistory

    fetch = run_fetch_bench(tsdb, n=n, days=1.0, repeats=3)
    t0, _ = ensure_tsdb(tsdb, n, 1.0)
    pols = bench_policies(n)
    start = t0 + DAY
    walls: list[float] = []
    cpus: list[float] = []
    phases: list[dict[str, float]] = []
    with (
        LocalPrometheus(tsdb, free_port(), lookback_s=5.0) as server,
        PrometheusClient(PrometheusConfig(server.url)) as client,
    ):
        history = PrometheusHistory(client, window_s=DAY)
        first = history.read(pols, start)
        fitted = _bench_model(model).fit([s for s in first.values() if len(s)][:200])
        store = Store(f"sqlite:///{db_dir / f'prom-cycle{n}.db'}")
        deps = Deps(history, fitted, InMemoryTarget(default_replicas=3), store, pols)
        settings = Settings()
        for k in range(runs + 1):
            now = start + k * 120.0
            gc.collect()
            c0 = time.process_time()
            t = time.perf_counter()
            report = run_once(deps, settings, now)
            wall = (time.perf_counter() - t) * 1000.0
            if k == 0:
                continue  # creates the workload rows
            walls.append(wall)
            cpus.append((time.process_time() - c0) * 1000.0)
            phases.append(report.phase_ms)
        store.close()
    return {
        "fetch_s": fetch["fetch_s"],
        "fetch": {k: v for k, v in fetch.items() if k != "params"},
        "cycle_ms": round(statistics.median(walls), 3),
        "cycle_cpu_ms": round(statistics.median(cpus), 3),
        "cycle_phase_ms": {k: round(statistics.median(p[k] for p in phases), 3) for k in phases[0]},
    }


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def bench_speed(
    trace: Series,
    model: str,
    sizes: Sequence[int] = (1000, 10000),
    cycle_sizes: Sequence[int] = (1000,),
    runs: int = 5,
    train_series: int = 200,
    db_dir: Path | None = None,
    tsdb: Path | None = None,
) -> dict[str, Any]:
    """Run the measurements; returns the JSON object of EVALUATION.md sections 6 and 7."""
    step = trace.step_s
    h = horizon_steps_for(step)
    context = int(round(1.1 * DAY / step))  # seasonal-naive needs one day back; learned models less
    fit_part = trace.between(trace.start, trace.start + 3 * DAY)
    fitted = _bench_model(model).fit([fit_part])
    result: dict[str, Any] = {
        "trace": trace.name,
        "resolution_s": step,
        "model": fitted.name,
        "forecast_ms": {},
        "plan_ms": {},
        "plan_first_ms": {},
        "plan_quota_ms": {},
        "plan_shared_ms": {},
        "plan_cpu_quota_ms": {},
        "plan_cpu_shared_ms": {},
        "cycle_ms": {},
        "cycle_memory_ms": {},
        "cycle_phase_ms": {},
        "fetch_s": None,
        "train_s_per_1000_series_day": None,
        "peak_rss_mb": None,
        "params": {"runs": runs, "horizon_steps": h, "context_steps": context, "train_series": train_series},
        "notes": [],
    }
    for n in sizes:
        forecast_ms, plan_ms, first_ms, extra = _forecast_and_plan(trace, fitted, n, context, h, runs)
        result["forecast_ms"][str(n)] = forecast_ms
        result["plan_ms"][str(n)] = plan_ms
        result["plan_first_ms"][str(n)] = first_ms
        for key, ms in extra.items():
            result[key][str(n)] = ms
        gc.collect()
    tmp = Path(tempfile.mkdtemp(prefix="scaleahead-speed-", dir=db_dir))
    for n in cycle_sizes:
        pols = policies_for(n, step)
        per_hour = int(round(3600.0 / step))
        t_first = trace.start + 1.2 * DAY
        span_room = trace.end - t_first - runs * 120.0 - DAY
        traces = {p.workload: trace for p in pols}
        shift = {p.workload: float((i * per_hour * step) % max(step, span_room)) for i, p in enumerate(pols)}
        store = Store(f"sqlite:///{tmp / f'cycle{n}.db'}")
        deps = Deps(_SeriesHistory(traces, shift), fitted, InMemoryTarget(default_replicas=3), store, pols)
        settings = Settings()
        phase_runs: list[dict[str, float]] = []
        walls = []
        cpus = []
        no_history = 0
        for k in range(runs + 1):
            now = t_first + k * 120.0  # 120 s apart: every cycle also writes its forecasts
            gc.collect()
            c0 = time.process_time()
            t0 = time.perf_counter()
            report = run_once(deps, settings, now)
            wall = (time.perf_counter() - t0) * 1000.0
            cpu = (time.process_time() - c0) * 1000.0
            if k == 0:
                continue  # the first cycle creates the workload rows; steady state is what counts
            walls.append(wall)
            cpus.append(cpu)
            phase_runs.append(report.phase_ms)
            no_history = max(no_history, len(report.errors))
        result["cycle_memory_ms"][str(n)] = round(statistics.median(walls), 3)
        result["cycle_ms"][str(n)] = None  # section 6's cycle reads from Prometheus: --tsdb
        CPU_MS.setdefault("cycle_memory_ms", {})[str(n)] = round(statistics.median(cpus), 3)
        if no_history:
            result["notes"].append(
                f"cycle {n}: up to {no_history} workloads had no usable history (their window lies in "
                "an outage of the real trace) and went to their fallback, as in production"
            )
        result["cycle_phase_ms"][str(n)] = {
            k: round(statistics.median(p[k] for p in phase_runs), 3) for k in phase_runs[0]
        }
        store.close()
    if tsdb is None:
        result["notes"].append(
            "cycle_ms (section 6: history from a real Prometheus) needs --tsdb DIR, as fetch_s does; "
            "cycle_memory_ms reads history from in-memory real-trace windows."
        )
    else:
        for n in cycle_sizes:
            prom = prometheus_cycle(tsdb, n, model, runs, tmp)
            result["fetch_s"] = prom["fetch_s"]
            result["cycle_ms"][str(n)] = prom["cycle_ms"]
            result.setdefault("prometheus", {})[str(n)] = prom
            result["notes"].append(
                f"cycle_ms.{n} (= prometheus.{n}.cycle_ms): the cycle with history from a real local Prometheus "
                "(incremental reads after a cold load)"
            )
    # The control loop's hourly warm-memory budget rebuild: the real functions trace's day, all functions.
    result["warm_budget_rebuild_ms"] = warm_budget_rebuild_ms(max(1, min(runs, 3)))
    # The same rebuild as the control loop runs it: handed the calibration its CalibrationBook fitted.
    result["warm_budget_replay_ms"] = warm_budget_rebuild_ms(max(1, min(runs, 3)), handed=True)
    # The control loop's invocation forecaster: each cycle (calibration reused) and once an hour (refitted).
    result["invocation_fit_ms"] = invocation_fit_ms(max(1, min(runs, 3)))
    # Training: the production model fitted on train_series real series of one day each.
    train = workload_series(trace, train_series, int(round(DAY / step)) + h)
    t0 = time.perf_counter()
    _bench_model(model).fit(train)
    elapsed = time.perf_counter() - t0
    if model in LEARNED:
        result["params"][model] = dict(BENCH_LSTM)
    result["train_s_per_1000_series_day"] = round(elapsed * 1000.0 / train_series, 3)
    result["peak_rss_mb"] = peak_rss_mb()
    result["cpu_ms"] = {k: dict(v) for k, v in CPU_MS.items()}
    CPU_MS.clear()
    return result


def invocation_fit_ms(runs: int) -> dict[str, dict[str, float]]:
    """Median ms of the loop's invocation forecaster on one day of the real azure-functions-1m trace.

    ``cycle``: what every cycle spends (the hazard refitted on the day with this hour's calibration
    reused, and the forecast); ``hourly``: the first cycle of an hour, which also refits the
    recurrence calibration (``scaleahead.loop.CalibrationBook``); ``hazard_only``: the same without
    a calibration. Keyed by the number of functions.
    """
    from forecaster.invocations import InvocationForecaster
    from scaleahead.traces import load_functions

    fns = load_functions("azure-functions-1m")
    n = len(fns.names)
    counts = fns.counts
    coef = InvocationForecaster(n, horizon=15).fit(counts).calibration

    def fitted(calibrate: bool, calibration: np.ndarray | None = None) -> None:
        InvocationForecaster(n, horizon=15, calibrate=calibrate, calibration=calibration).fit(counts).predict()

    out = {
        "hourly": _median_ms(lambda: fitted(True), runs, ("invocation_fit_ms.hourly", n)),
        "cycle": _median_ms(lambda: fitted(coef is not None, coef), runs, ("invocation_fit_ms.cycle", n)),
        "hazard_only": _median_ms(lambda: fitted(False), runs, ("invocation_fit_ms.hazard_only", n)),
    }
    return {str(n): out}


def warm_budget_rebuild_ms(runs: int, handed: bool = False) -> dict[str, float]:
    """Median ms of one warm-memory budget rebuild (``scaleahead.warm_budgets.rebuild``) over one day.

    Once an hour per budget group: the invocation forecaster run online over the last day of the
    real azure-functions-1m trace (1,000 functions, 1,440 minutes) and the budget replayed on it.
    Without ``handed`` the rebuild fits the recurrence calibration on the day first (the benchmark's
    way); with it, it is handed one already fitted (the control loop's way, from its
    ``CalibrationBook``). Keyed by the number of functions.
    """
    from forecaster.invocations import InvocationForecaster
    from scaleahead.traces import load_functions
    from scaleahead.warm_budgets import rebuild

    fns = load_functions("azure-functions-1m")
    key = (60.0, 1.0, 600.0, 9000.0)
    n = len(fns.names)
    memory = fns.memory_mb.tolist()
    if handed:
        coef = InvocationForecaster(n, horizon=1).fit(fns.counts).calibration
        ms = _median_ms(
            lambda: rebuild(fns.counts, memory, 60.0, key, coef, fit_calibration=False),
            runs,
            ("warm_budget_replay_ms", n),
        )
    else:
        ms = _median_ms(lambda: rebuild(fns.counts, memory, 60.0, key), runs, ("warm_budget_rebuild_ms", n))
    return {str(n): ms}
