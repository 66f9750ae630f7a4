"""``scaleahead bench serverless``: warm pools against cold starts on a functions trace.

EVALUATION.md section 5: policies scaleahead, fixed_keepalive_10m, fixed_keepalive_20m,
hybrid_histogram and oracle, all in one run on the same test period (docs/serverless.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from scaleahead.commands import check_output, check_positive, number_list
from scaleahead.errors import UserError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    del app
    bench_app.command("serverless")(bench_serverless)


def bench_serverless(
    trace: Annotated[
        str,
        typer.Option(
            help="azure-functions-1m, or the path of a functions CSV (HashFunction,HashOwner,HashApp,minute_1...)."
        ),
    ],
    json_out: Annotated[Path, typer.Option("--json", help="Write the metrics here (EVALUATION.md section 7).")],
    durations: Annotated[
        Path | None, typer.Option(help="Function durations CSV in the Azure layout (optional, for a path trace).")
    ] = None,
    memory: Annotated[
        Path | None,
        typer.Option(
            help="App memory CSV in the Azure layout (HashApp, AverageAllocatedMb); default: the trace's own file for "
            "azure-functions-1m, else 128 MB per function."
        ),
    ] = None,
    decisions: Annotated[
        Path | None, typer.Option(help="Write policy,function,minute,invocations,warm rows here (.gz to compress).")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG: cold-start share against wasted memory.")] = None,
    history_minutes: Annotated[
        int | None,
        typer.Option(
            help="Minutes of history before the test period (default: 360 for azure-functions-1m, else the "
            "first 75 % of the minutes, EVALUATION.md section 2)."
        ),
    ] = None,
    min_probability: Annotated[
        float | None,
        typer.Option(help="Warm-pool threshold of the scaleahead policy (default: the policy schema's default)."),
    ] = None,
    cold_start_cost: Annotated[
        float | None,
        typer.Option(
            help="warmPool.coldStartCostMbMinutes of the scaleahead policy: MB-minutes one avoided cold start is "
            "worth (default: the policy schema's default; 0 = none, minProbability alone decides)."
        ),
    ] = None,
    budget_ratio: Annotated[
        float | None,
        typer.Option(
            help="warmPool.keepAliveBudgetRatio of the scaleahead policy: re-choose the cold-start cost every hour "
            "to keep idle warm memory at this multiple of a 10-minute keep-alive's (default: the policy schema's "
            "default; 0 = off, the cost stays fixed)."
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated minProbability values: scaleahead's curve with minProbability alone deciding "
            "(no cold-start cost), e.g. 0.005,0.01,0.02."
        ),
    ] = None,
    sweep_cost: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated coldStartCostMbMinutes values: scaleahead's trade-off curve as the cost varies, "
            "e.g. 2000,4000,8900,20000."
        ),
    ] = None,
    sweep_budget: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated keepAliveBudgetRatio values: scaleahead's curve with the warm-memory budget, "
            "e.g. 0.6,0.8,1.0,1.2,1.5 (--sweep-cost gives the curve of fixed costs without a budget)."
        ),
    ] = None,
    peer_curves: Annotated[
        bool,
        typer.Option(
            help="Also trace the peers' curves: fixed keep-alive of 2 to 240 min, hybrid histogram with a "
            "30 min to 8 h range."
        ),
    ] = False,
    calibrate: Annotated[
        bool,
        typer.Option(
            help="Choose coldStartCostMbMinutes on the history only: the largest cost whose wasted memory on "
            "history minutes [120, history) is at most fixed_keepalive_10m's there (JSON 'calibration')."
        ),
    ] = False,
    functions: Annotated[
        int | None,
        typer.Option(
            help="Use only this many functions, evenly spaced over the rows (quick iterations; the recorded "
            "numbers use all)."
        ),
    ] = None,
) -> None:
    """Serverless pre-warming: cold starts and wasted memory per policy (EVALUATION.md section 5)."""
    from rich.console import Console
    from rich.table import Table

    from scaleahead.bench import serverless as bench
    from scaleahead.traces import load_functions

    check_output(json_out, "--json")
    check_output(decisions, "--decisions")
    check_output(plot, "--plot", ".png")
    for label, p in (("--durations", durations), ("--memory", memory)):
        if p is not None and not p.is_file():
            raise UserError(f"{label} {p} does not exist.", "Give the path of a CSV in the Azure layout.")
    if trace != "azure-functions-1m" and not Path(trace).is_file():
        raise UserError(
            f"--trace {trace!r} is neither azure-functions-1m nor an existing functions CSV.",
            "Give azure-functions-1m or the path of a CSV with HashFunction,HashOwner,HashApp,minute_1 ... columns.",
        )
    threshold = bench.DEFAULT_MIN_PROBABILITY if min_probability is None else min_probability
    if not 0.0 <= threshold <= 1.0:
        raise UserError(f"--min-probability {threshold} is not a probability.", "Give a value in [0, 1].")
    check_positive("--cold-start-cost", cold_start_cost, "Give MB-minutes > 0, or 0 for none.", zero=True)
    cost = bench.DEFAULT_COLD_START_COST if cold_start_cost is None else (cold_start_cost or None)
    check_positive(
        "--budget-ratio", budget_ratio, "Give a multiple > 0 (1.0: a 10-minute keep-alive's), or 0 for off.", zero=True
    )
    ratio = bench.DEFAULT_BUDGET_RATIO if budget_ratio is None else (budget_ratio or None)
    sweep_values = number_list("--sweep", sweep, "0.01,0.02,0.05")
    if any(not 0.0 <= v <= 1.0 for v in sweep_values):
        raise UserError(f"--sweep {sweep!r} has a value outside [0, 1].", "Give probabilities, e.g. 0.01,0.02.")
    cost_values = number_list("--sweep-cost", sweep_cost, "2000,8900,20000")
    if any(not (math.isfinite(v) and v > 0) for v in cost_values):
        raise UserError(
            f"--sweep-cost {sweep_cost!r} has a value that is not a finite number above 0.", "Give MB-minutes > 0."
        )
    budget_values = number_list("--sweep-budget", sweep_budget, "0.8,1.0,1.2")
    if any(not (math.isfinite(v) and v > 0) for v in budget_values):
        raise UserError(
            f"--sweep-budget {sweep_budget!r} has a value that is not a finite number above 0.",
            "Give multiples > 0, e.g. 0.8,1.0.",
        )
    check_positive("--history-minutes", history_minutes, "Give the minutes of history, e.g. 360, or leave it out.")
    if functions is not None and functions < 1:
        raise UserError(f"--functions {functions} is not a positive count.", "Give e.g. 200.")
    fns = load_functions(trace, str(durations) if durations else None, str(memory) if memory else None)
    if functions is not None:
        fns = bench.subset(fns, functions)
    minutes = fns.counts.shape[1]
    if history_minutes is not None:
        history = history_minutes
    else:
        history = 360 if trace == "azure-functions-1m" else int(minutes * 0.75)  # EVALUATION.md 2
    console = Console(stderr=True)
    calibration = None
    if calibrate:
        console.print("calibrating coldStartCostMbMinutes on the history ...")
        calibration = bench.calibrate_cost(fns, history)
    run = bench.run_policies(
        fns,
        history,
        min_probability=threshold,
        trace_name=trace,
        progress=lambda name: console.print(f"running {name} ..."),
        cold_start_cost=cost,
        keep_alive_budget_ratio=ratio,
    )
    if sweep_values or cost_values or peer_curves or budget_values:
        console.print("tracing the trade-off curves ...")
    start_cost = cost or bench.DEFAULT_COLD_START_COST or 9000.0
    points = bench.tradeoff_curves(fns, history, cost_values, sweep_values, peer_curves, budget_values, start_cost)
    curve = [
        (pt.value, pt.wasted_memory_rel_fixed10, pt.cold_start_fraction)
        for pt in points
        if pt.policy == "scaleahead_probability_only"
    ]
    extra: dict[str, object] = {}
    if history_minutes is not None:
        extra["history_minutes"] = history_minutes
    if functions is not None:
        extra["functions"] = functions
    for label, given in (("durations", durations), ("memory", memory)):
        if given is not None:
            extra[label] = str(given)
    out = bench.to_json(run, extra)
    if curve:
        out["tradeoff_min_probability"] = [
            {"min_probability": v, "wasted_memory_rel_fixed10": x, "cold_start_fraction": y} for v, x, y in curve
        ]
    if points:
        out["tradeoff"] = [
            {
                "policy": pt.policy,
                pt.setting: pt.value,
                "cold_start_fraction": pt.cold_start_fraction,
                "wasted_memory_rel_fixed10": pt.wasted_memory_rel_fixed10,
                "cold_starts": pt.cold_starts,
            }
            for pt in points
            if pt.policy != "scaleahead_probability_only"
        ]
    if calibration is not None:
        out["calibration"] = {
            "cold_start_cost_mb_minutes": calibration.cold_start_cost_mb_minutes,
            "validation_minutes": list(calibration.validation_minutes),
            "wasted_memory_rel_fixed10": calibration.wasted_memory_rel_fixed10,
            "cold_starts": calibration.cold_starts,
            "fixed10_cold_starts": calibration.fixed10_cold_starts,
        }
        console.print(
            f"calibrated coldStartCostMbMinutes on history minutes {calibration.validation_minutes[0]}-"
            f"{calibration.validation_minutes[1]}: {calibration.cold_start_cost_mb_minutes:g} "
            f"(wasted memory {calibration.wasted_memory_rel_fixed10:.3f} x fixed 10 min there, "
            f"{calibration.cold_starts} vs {calibration.fixed10_cold_starts} cold starts)"
        )
    json_out.write_text(json.dumps(out, indent=2) + "\n")
    if decisions is not None:
        bench.write_decisions(run, decisions)
    if plot is not None:
        bench.write_plot(run, plot, curve, [pt for pt in points if pt.policy != "scaleahead_probability_only"])
    table = Table(
        title=f"serverless pre-warming on {trace}: {len(fns.names)} functions, {run.test_minutes} test minutes"
    )
    cols = ("cold_start_fraction", "p75_function_cold_pct", "wasted_memory_mb_min", "wasted_memory_rel_fixed10")
    table.add_column("policy")
    for c in cols:
        table.add_column(c, justify="right")
    for name, m in run.metrics.items():
        table.add_row(name, *("-" if m[c] is None else f"{float(m[c] or 0):.4g}" for c in cols))
    Console().print(table)
    if points:
        curves = Table(title="trade-off curves (test period; wasted memory relative to fixed_keepalive_10m)")
        for c in ("policy", "setting", "cold_start_fraction", "cold_starts", "wasted_memory_rel_fixed10"):
            curves.add_column(c, justify="left" if c in ("policy", "setting") else "right")
        for pt in points:
            curves.add_row(
                pt.policy,
                f"{pt.setting} {pt.value:g}",
                f"{pt.cold_start_fraction:.5f}",
                str(pt.cold_starts),
                f"{pt.wasted_memory_rel_fixed10:.3f}",
            )
        Console().print(curves)
