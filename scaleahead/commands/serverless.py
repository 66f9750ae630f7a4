"""``scaleahead bench serverless``: warm pools against cold starts on a functions trace.

EVALUATION.md section 5: policies scaleahead, fixed_keepalive_10m, fixed_keepalive_20m,
hybrid_histogram and oracle, all in one run on the same test period (docs/serverless.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

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
        typer.Option(help="App memory CSV in the Azure layout (HashApp, AverageAllocatedMb); default 128 MB each."),
    ] = None,
    decisions: Annotated[
        Path | None, typer.Option(help="Write policy,function,minute,invocations,warm rows here (.gz to compress).")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG: cold-start share against wasted memory.")] = None,
    history_minutes: Annotated[
        int | None,
        typer.Option(
            help="Minutes of history before the test period (default: 360 for azure-functions-1m, else 25 %)."
        ),
    ] = None,
    min_probability: Annotated[
        float | None,
        typer.Option(help="Warm-pool threshold of the scaleahead policy (default: the policy schema's default)."),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(help="Comma-separated minProbability values: also run scaleahead at each (trade-off curve)."),
    ] = None,
) -> None:
    """Serverless pre-warming: cold starts and wasted memory per policy (EVALUATION.md section 5)."""
    from rich.console import Console
    from rich.table import Table

    from scaleahead.bench import serverless as bench
    from scaleahead.traces import load_functions

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
    sweep_values: list[float] = []
    if sweep:
        try:
            sweep_values = [float(x) for x in sweep.split(",") if x.strip()]
        except ValueError as exc:
            raise UserError(f"--sweep {sweep!r} is not a list of numbers.", "Give e.g. 0.01,0.02,0.05.") from exc
    fns = load_functions(trace, str(durations) if durations else None, str(memory) if memory else None)
    minutes = fns.counts.shape[1]
    if history_minutes is not None:
        history = history_minutes
    else:
        history = 360 if trace == "azure-functions-1m" else int(minutes * 0.25)
    console = Console(stderr=True)
    run = bench.run_policies(
        fns,
        history,
        min_probability=threshold,
        trace_name=trace,
        progress=lambda name: console.print(f"running {name} ..."),
    )
    curve: list[tuple[float, float, float]] = []
    base = run.metrics["fixed_keepalive_10m"]["wasted_memory_mb_min"]
    for level in sweep_values:
        console.print(f"running scaleahead at minProbability {level:g} ...")
        warm, _ = bench.run_scaleahead(fns, history, level)
        m = bench.score(run.counts, warm, fns.memory_mb)
        rel = float(m["wasted_memory_mb_min"] or 0.0) / float(base) if base else float("nan")
        curve.append((level, rel, float(m["cold_start_fraction"] or 0.0)))
    extra: dict[str, object] = {}
    if history_minutes is not None:
        extra["history_minutes"] = history_minutes
    for label, p in (("durations", durations), ("memory", memory)):
        if p is not None:
            extra[label] = str(p)
    out = bench.to_json(run, extra)
    if curve:
        out["tradeoff_min_probability"] = [
            {"min_probability": p, "wasted_memory_rel_fixed10": x, "cold_start_fraction": y} for p, x, y in curve
        ]
    json_out.write_text(json.dumps(out, indent=2) + "\n")
    if decisions is not None:
        bench.write_decisions(run, decisions)
    if plot is not None:
        bench.write_plot(run, plot, curve)
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
