"""``scaleahead demo``: the real control loop on a built-in real trace, with nothing to set up.

Why it exists: a person should see scaleahead work in two minutes without a cluster, Prometheus
or a config file. The demo wires the *real* parts together (composition root):

- ``TraceHistory``: a ``HistorySource`` that serves the trace strictly before ``now``;
- the forecaster: the default model if registered (``lstm``), else the best baseline on history;
- ``actuator.simulated.SimulatedService``: replicas ready after the start-up delay;
- ``storage.Store`` on SQLite in a temporary folder;
- ``scaleahead.loop.run_once`` driven by a ``VirtualClock``, one cycle per trace step.

Then it replays the HPA algorithm (``scaleahead.bench.peers.Hpa``) on the same day and prints
both outcomes and the last plan with its reasons.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from actuator.simulated import SimulatedService
from scaleahead.bench.replay import (
    ReplaySetup,
    compute_metrics,
    default_model_name,
    prepare,
    replay_policy_object,
    run_hpa,
    run_oracle,
)
from scaleahead.clock import VirtualClock
from scaleahead.errors import DataError
from scaleahead.loop import CycleReport, Deps, run_once
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.types import Plan, Series, WorkloadRef

DAY_S = 86400.0


class TraceHistory:
    """Demand history from a trace: for every policy, the steps of the last ``window_s`` that ended
    by ``now`` (a step in progress at an off-grid ``now`` is not known yet: no-peeking audit)."""

    def __init__(self, series: Series, window_s: float = DAY_S + 3600.0) -> None:
        self.series = series
        self.window_s = window_s

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        part = self.series.known_by(now).between(now - self.window_s, now)
        return {p.workload: part for p in policies}


@dataclass
class DemoResult:
    setup: ReplaySetup
    steps: int
    model: str
    model_note: str
    metrics: dict[str, dict[str, float]]
    last_report: CycleReport
    last_change: Plan | None
    plans_recorded: int
    loop_s: float
    fit_s: float


def simulate(
    trace: str = "alibaba-cpu-10s-embedded",
    hours: float = 24.0,
    model: str | None = None,
    column: str | None = None,
    db_dir: Path | None = None,
    on_step: object = None,
) -> DemoResult:
    """Run the loop over the first ``hours`` of the trace's test period; return the outcome."""
    from forecaster.registry import make_model
    from storage import Store

    series = load_series(trace, column=column)
    full = prepare(series, None, 60.0, name=trace)
    steps = int(round(hours * 3600 / full.step_s))
    if steps < 1:
        raise DataError(f"--hours {hours:g} is shorter than one step of {full.step_s:g} s.", "Give more hours.")
    steps = min(steps, full.demand.size)
    setup = ReplaySetup(
        full.series, full.split, full.i0, full.demand[:steps], full.capacity, full.startup_s, full.initial_ready
    )
    if model:
        model_name, note = model, f"{model} (chosen with --model)"
    else:
        model_name, note = default_model_name(setup)
    # Fit on the last days of history only: enough for a daily season, fast enough for a demo.
    fit_from = max(setup.split.start, setup.split.test_start - 3 * DAY_S)
    started = time.perf_counter()
    forecaster = make_model(model_name)
    forecaster.fit([series.between(fit_from, setup.split.test_start)])
    fit_s = time.perf_counter() - started

    settings = Settings()
    settings.loop.interval_s = setup.step_s
    policy = replay_policy_object(setup, "demo")
    ref = policy.workload
    clock = VirtualClock(setup.t0)
    target = SimulatedService(clock, setup.startup_s, {ref: setup.initial_ready})
    tmp = tempfile.TemporaryDirectory(prefix="scaleahead-demo-") if db_dir is None else None
    folder = Path(tmp.name) if tmp is not None else db_dir
    assert folder is not None
    store = Store(f"sqlite:///{folder / 'demo.db'}")
    deps = Deps(history=TraceHistory(series), forecaster=forecaster, target=target, store=store, policies=[policy])
    desired = np.zeros(steps, dtype=np.int64)
    allocated = np.zeros(steps, dtype=np.int64)
    ready = np.zeros(steps, dtype=np.int64)
    report: CycleReport | None = None
    last_change: Plan | None = None
    started = time.perf_counter()
    try:
        for i in range(steps):
            now = setup.t0 + i * setup.step_s
            clock.advance_to(now)
            report = run_once(deps, settings, now, dry_run=False)
            desired[i] = target.replicas(ref)
            allocated[i] = target.replicas(ref)
            ready[i] = target.ready(ref, now)
            if report.plan.changes:
                last_change = report.plan
            if callable(on_step):
                on_step(i + 1)
        plans = store.count_plans()
    finally:
        store.close()
        if tmp is not None:
            tmp.cleanup()
    loop_s = time.perf_counter() - started
    assert report is not None
    metrics = {
        "scaleahead": compute_metrics(
            setup.demand, desired, allocated, ready, setup.capacity, setup.step_s, setup.initial_ready
        ),
    }
    for name, run in (("hpa", run_hpa(setup)), ("oracle", run_oracle(setup))):
        metrics[name] = compute_metrics(
            setup.demand, run.desired, run.allocated, run.ready, setup.capacity, setup.step_s, setup.initial_ready
        )
    return DemoResult(setup, steps, model_name, note, metrics, report, last_change, plans, loop_s, fit_s)


def run_demo(trace: str, hours: float, model: str | None, column: str | None) -> DemoResult:
    """``scaleahead demo``: simulate with a progress bar, then print the summary and the last plan."""
    from scaleahead.traces import check_trace

    check_trace(trace)
    out = Console()
    out.print(
        f"[bold]scaleahead demo[/]: replaying {hours:g} h of [cyan]{trace}[/] through the real control loop "
        "(virtual clock, simulated cluster, SQLite in a temporary folder)."
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
        transient=True,
    ) as bar:
        task = bar.add_task("control cycles", total=None)

        def step(k: int) -> None:
            if bar.tasks[0].total is None:
                bar.update(task, total=max(k, int(round(hours * 3600 / 10))))
            bar.update(task, completed=k)

        result = simulate(trace, hours, model, column, on_step=step)
    s = result.setup
    out.print(f"forecaster: {result.model_note}; fitted in {result.fit_s:.1f} s.", soft_wrap=True)
    replayed_h = result.steps * s.step_s / 3600
    if replayed_h < hours * 0.999:
        out.print(
            f"[yellow]note[/]: the trace's test period holds only {replayed_h:.3g} h; replayed all of it, "
            f"not the {hours:g} h asked for.",
            soft_wrap=True,
        )
    out.print(
        f"{result.steps:,} cycles of {s.step_s:g} s in {result.loop_s:.1f} s; "
        f"{result.plans_recorded:,} plans recorded; capacity {s.capacity:.4g} {s.series.unit or 'demand'} "
        f"per replica, start-up {s.startup_s:g} s."
    )
    table = Table(title="same period, same simulated service")
    for col in ("policy", "SLO violations (steps)", "unserved demand", "replica-hours", "utilization"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name, m in result.metrics.items():
        table.add_row(
            name,
            f"{m['violation_fraction']:.2%}",
            f"{m['unserved_fraction']:.3%}",
            f"{m['replica_seconds'] / 3600:,.1f}",
            f"{m['utilization']:.2f}",
        )
    out.print(table)
    a, h = result.metrics["scaleahead"], result.metrics["hpa"]
    cost = a["replica_seconds"] / h["replica_seconds"] if h["replica_seconds"] else float("nan")
    out.print(
        f"scaleahead vs HPA: {a['violation_fraction']:.2%} vs {h['violation_fraction']:.2%} of steps short, "
        f"at {cost:.2f}x the HPA's replica-hours (the oracle knows the future: the least any policy can pay)."
    )
    last = result.last_change or result.last_report.plan
    out.print("[bold]last plan that changed something[/]:" if result.last_change else "[bold]last plan[/]:")
    for action in last.actions:
        out.print(f"  {action.reason.message}", soft_wrap=True)
    return result
