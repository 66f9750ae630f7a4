"""``scaleahead bench soak``: memory and per-workload state of a daemon over many cycles with policy churn.

Why it exists: the command line for ``scaleahead.bench.soak``; docs/benchmarks.md's "Soak"
section is measured with it. It prints one row per sample as soon as it is taken, then the growth
per 1,000 cycles and a verdict per structure, and writes ``--json`` (samples and summary) at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output, check_positive
from scaleahead.errors import UserError

#: the columns of a printed row, then the structures' sizes, then the rows per table
COLUMNS = [
    ("cycle", "cycle"),
    ("virtual_h", "vt_h"),
    ("live_policies", "live"),
    ("rss_kb", "rss_kb"),
    ("peak_rss_kb", "peak_kb"),
    ("fds", "fds"),
    ("threads", "thr"),
    ("metric_series", "series"),
    ("metric_series_removed", "removed"),
    ("cycle_ms_median", "cycle_ms"),
]


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command()
    def soak(
        cycles: Annotated[int, typer.Option(help="Daemon ticks to run, 10 virtual seconds apart.")] = 6000,
        workloads: Annotated[int, typer.Option(help="Stable policies, kept the whole run.")] = 8,
        churn: Annotated[
            int, typer.Option(help="Churning policies, replaced under new names in a new namespace (0: none).")
        ] = 4,
        churn_every: Annotated[
            int, typer.Option(help="Cycles between two replacements of the churning policies.")
        ] = 500,
        sample_every: Annotated[
            int, typer.Option(help="Cycles between two samples (the first cycle is sampled too).")
        ] = 1000,
        forecast_retention_h: Annotated[
            float,
            typer.Option(
                help="jobs.forecast_retention_days (and outcome_retention_days) for the run, in hours (short, so "
                "prune deletes some)."
            ),
        ] = 1.2,
        plan_retention_h: Annotated[
            float, typer.Option(help="jobs.plan_retention_days for the run, in hours (short, so prune deletes some).")
        ] = 2.4,
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                help="SQLAlchemy URL of a database to soak against (written to); default: a temporary SQLite "
                "file, deleted at the end (SCALEAHEAD_STORAGE__URL and SCALEAHEAD_DB_URL are not read).",
            ),
        ] = None,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the samples and the summary here.")] = None,
    ) -> None:
        """Run a real Daemon on a virtual clock with policy churn; print memory and per-workload state sizes.

        Every --sample-every cycles one row: cycle, virtual hours, live policies, RSS and peak RSS
        (kB), open fds, threads, exported metric series and those naming a removed workload, the
        median cycle ms since the last row, the size of each per-workload structure and the rows
        per database table. At the end: growth per 1,000 cycles after the first sample
        (least squares) and a verdict per structure, bounded (never more entries than the live
        policies) or grows. forecast.model is seasonal_naive; jobs run inline on the virtual
        clock (prune every 30 min, accuracy report hourly). Without --db the database is a
        temporary SQLite file, deleted at the end.
        """
        for option, value in (("--cycles", cycles), ("--workloads", workloads), ("--churn-every", churn_every)):
            check_positive(option, value, "Give a count of 1 or more.")
        check_positive("--churn", churn, "Give a count of 0 or more.", zero=True)
        check_positive("--sample-every", sample_every, "Give a count of 1 or more.")
        check_positive("--forecast-retention-h", forecast_retention_h, "Give hours above 0, e.g. 1.2.")
        check_positive("--plan-retention-h", plan_retention_h, "Give hours above 0, e.g. 2.4.")
        if sample_every > cycles:
            raise UserError(
                f"--sample-every {sample_every} is larger than --cycles {cycles}: only cycle 1 would be sampled.",
                "Give --sample-every at most --cycles (and --cycles at least twice it, for a growth rate).",
            )
        if churn and churn_every > cycles:
            raise UserError(
                f"--churn-every {churn_every} is larger than --cycles {cycles}: no policy would be replaced.",
                "Give --churn-every at most --cycles, or --churn 0 for a run without churn.",
            )
        check_output(json_out, "--json")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        from scaleahead.bench.soak import STRUCTURES, bench_soak

        print(" ".join(f"{h:>9}" for _, h in COLUMNS) + "  sizes | db rows", flush=True)

        def show(row: dict[str, Any]) -> None:
            head = " ".join(f"{row[k]:>9}" for k, _ in COLUMNS)
            sizes = " ".join(f"{k}={v}" for k, v in row["sizes"].items())
            rows = " ".join(f"{k}={v}" for k, v in row["db_rows"].items())
            print(f"{head}  {sizes} | {rows}", flush=True)

        result = bench_soak(
            cycles=cycles,
            workloads=workloads,
            churn=churn,
            churn_every=churn_every,
            sample_every=sample_every,
            forecast_retention_h=forecast_retention_h,
            plan_retention_h=plan_retention_h,
            db_url=db,
            progress=show,
        )
        summary = result["summary"]
        growth = summary["growth_per_1000_cycles"]

        def rate(value: float | None) -> str:
            return "n/a (fewer than 3 samples)" if value is None else f"{value:+g}"

        print(
            f"growth per 1,000 cycles after the first sample: rss_kb {rate(growth['rss_kb'])}, "
            f"metric_series {rate(growth['metric_series'])}"
        )
        for name, v in summary["verdicts"].items():
            what = STRUCTURES.get(name, "exported series naming a removed workload")
            extra = "" if name not in growth else f", growth {rate(growth[name])}/1000 cycles"
            print(f"{v['verdict']:>8}  {name}: max {v['max']} (bound {v['bound']}{extra}); {what}")
        if json_out is not None:
            json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {json_out}")
