"""``scaleahead bench canary``: canaries decided by a daemon on its own measured outcomes.

Why it exists: the command line for ``scaleahead.bench.canary``; docs/benchmarks.md's "Canaries on
measured outcomes" section is measured with it. It prints one line per run as it ends, then how
the runs ended, and writes ``--json`` at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output, check_positive, share_steps
from scaleahead.errors import UserError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command()
    def canary(
        runs: Annotated[int, typer.Option(help="Canaries to run, each on its own slice of the trace.")] = 4,
        workloads: Annotated[int, typer.Option(help="Services in the rollout group.")] = 40,
        trace: Annotated[str, typer.Option(help="Trace spread over the services (scaled, shifted).")] = "nasa-10s",
        champion: Annotated[str, typer.Option(help="Production's model family (a baseline).")] = "seasonal_naive",
        challenger: Annotated[
            str, typer.Option(help="The canary's model family; the champion's for an A/A run.")
        ] = "seasonal_naive",
        steps: Annotated[str, typer.Option(help="Canary share steps.")] = "0.25,0.5,1.0",
        window_s: Annotated[float, typer.Option("--window-s", help="Canary window (s).")] = 3600.0,
        baseline_h: Annotated[
            float,
            typer.Option(
                "--baseline-h",
                help="Hours on the champion before the canary starts (more than a day: the baselines are the same "
                "hours of the day before).",
            ),
        ] = 26.0,
        max_hours: Annotated[
            float, typer.Option("--max-hours", help="Hours a canary may run before the run stops.")
        ] = 16.0,
        offset_h: Annotated[
            float, typer.Option("--offset-h", help="Hours between the starts of consecutive runs in the trace.")
        ] = 7.0,
        startup_s: Annotated[
            float, typer.Option("--startup-s", help="Seconds until an added replica is ready.")
        ] = 60.0,
        max_violation_increase: Annotated[
            float, typer.Option(help="The canary's violation margin (an added share of steps), as rollout start.")
        ] = 0.02,
        max_cost_increase: Annotated[
            float, typer.Option(help="The canary's cost margin (relative), as rollout start.")
        ] = 0.05,
        max_error_increase: Annotated[
            float, typer.Option(help="The canary's forecast-error margin (relative), as rollout start.")
        ] = 0.05,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write every run's decisions here.")] = None,
    ) -> None:
        """A real daemon on a virtual clock decides canaries on the outcomes it measures (docs/actuator.md).

        Each run: WORKLOADS services spread from TRACE, BASELINE_H hours on CHAMPION, then a canary
        of CHALLENGER that the daemon evaluates every window (jobs.evaluate_canaries) until it is
        promoted, rolled back or MAX_HOURS pass. Prints each run's decisions and how the runs ended."""
        from forecaster.registry import LEARNED, available_models
        from scaleahead.bench.canary import bench_canary
        from scaleahead.commands.rollout import check_margins

        check_margins(max_violation_increase, max_cost_increase, max_error_increase)

        if runs < 1 or workloads < 2:
            raise UserError("--runs must be at least 1 and --workloads at least 2.", "E.g. --runs 4 --workloads 40.")
        for value, option in ((window_s, "--window-s"), (baseline_h, "--baseline-h"), (max_hours, "--max-hours")):
            check_positive(option, value, "Give a number above 0.")
        check_positive("--offset-h", offset_h, "Give hours >= 0.", zero=True)
        check_positive("--startup-s", startup_s, "Give seconds >= 0.", zero=True)
        for name, option in ((champion, "--champion"), (challenger, "--challenger")):
            if name not in available_models() or name in LEARNED:
                raise UserError(
                    f"{option} {name!r} is not a baseline model family.",
                    "Use naive, seasonal_naive, window_mean or ridge (fitted in the run; a learned model would need a "
                    "trained checkpoint).",
                )
        if json_out is not None:
            check_output(json_out, "--json")

        def show(r: dict[str, Any]) -> None:
            typer.echo(
                f"run {r['run']}: {r['ending']} at share {r['final_share']:.0%} after {r['hours']} h "
                f"({r['windows']} window(s), {r['cpu_s']} s CPU)"
            )
            for d in r["decisions"]:
                if d["decision"] == "wait" and "level" not in d:
                    continue
                typer.echo(
                    f"  +{d['at_h']} h at {d['share']:.0%} ({d['champion_workloads']} champion, "
                    f"{d['challenger_workloads']} challenger): {d['decision']}: {d['reason']}"
                )

        doc = bench_canary(
            list(range(runs)),
            progress=show,
            trace=trace,
            workloads=workloads,
            champion=champion,
            challenger=challenger,
            steps=share_steps("--steps", steps),
            window_s=window_s,
            baseline_h=baseline_h,
            max_hours=max_hours,
            offset_h=offset_h,
            startup_s=startup_s,
            margins=(max_violation_increase, max_cost_increase, max_error_increase),
        )
        typer.echo(
            f"{challenger} vs {champion}, {runs} run(s): " + ", ".join(f"{k} {v}" for k, v in doc["endings"].items())
        )
        if json_out is not None:
            json_out.write_text(json.dumps(doc, indent=2, default=str))
