"""``scaleahead bench speed``: the limits of one process (EVALUATION.md section 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from scaleahead.commands import check_output
from scaleahead.errors import UserError


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UserError(f"{what} {text!r} is not a comma-separated list of counts.", "E.g. 1000,10000.") from exc
    if not values or min(values) < 1:
        raise UserError(f"{what} {text!r} needs counts of at least 1.", "E.g. 1000,10000.")
    return values


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command()
    def speed(
        trace: Annotated[str, typer.Option(help="Trace whose real demand every workload replays.")] = "nasa-10s",
        model: Annotated[
            str | None, typer.Option(help="Forecaster (default: settings forecast.model, else its fallback).")
        ] = None,
        sizes: Annotated[str, typer.Option(help="Workload counts for forecast_ms and plan_ms.")] = "1000,10000",
        cycle_sizes: Annotated[str, typer.Option(help="Workload counts for cycle_ms.")] = "1000",
        runs: Annotated[int, typer.Option(min=1, help="Runs per measurement (the median is reported).")] = 5,
        train_series: Annotated[int, typer.Option(min=1, help="Series of one day each to time training on.")] = 200,
        threads: Annotated[int, typer.Option(min=1, help="CPU threads for torch (the machine has 2 cores).")] = 2,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the result object here.")] = None,
        tsdb: Annotated[
            Path | None,
            typer.Option(
                help="A folder for the Prometheus TSDB of the fetch bench (backfilled once with promtool, then "
                "reused): adds fetch_s and cycles reading from a real local Prometheus."
            ),
        ] = None,
    ) -> None:
        """forecast_ms, plan_ms, cycle_ms, train_s_per_1000_series_day and peak_rss_mb of one process.

        Also plan_first_ms (the first plan with new policy objects); plan_quota_ms, plan_shared_ms,
        plan_cpu_quota_ms and plan_cpu_shared_ms (the plan with a namespace quota on pods or on
        requests.cpu, with room or 10 % short); warm_budget_rebuild_ms: one hourly warm-memory
        budget rebuild for 1,000 functions (and warm_budget_replay_ms: the same handed the loop's
        calibration), and invocation_fit_ms: the loop's invocation forecaster on that day (cycle,
        hourly, hazard_only).
        """
        import os

        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        from forecaster.registry import available_models
        from scaleahead.bench.speed import bench_speed
        from scaleahead.settings import Settings
        from scaleahead.traces import load_series

        check_output(json_out, "--json")
        settings = Settings.from_env()
        name = model or settings.forecast.model
        if name not in available_models():
            if model is not None:
                raise UserError(f"Unknown model {model!r}.", f"Known models: {', '.join(available_models())}.")
            name = settings.forecast.fallback_model
        try:
            import torch

            torch.set_num_threads(threads)
            torch.set_flush_denormal(True)
        except ImportError:
            pass
        series = load_series(trace)
        result = bench_speed(
            series,
            name,
            sizes=_ints(sizes, "--sizes"),
            cycle_sizes=_ints(cycle_sizes, "--cycle-sizes"),
            runs=runs,
            train_series=train_series,
            tsdb=tsdb,
        )
        result["params"]["threads"] = threads
        text = json.dumps(result, indent=2)
        print(text)
        if json_out is not None:
            json_out.write_text(text + "\n", encoding="utf-8")
