"""``scaleahead bench control-plane``: the control plane against the Kubernetes API emulator.

Why it exists: the command line for ``scaleahead.bench.control_plane``; docs/benchmarks.md's
"Control plane" section is measured with it. It prints one row per section as soon as it is
measured and writes ``--json`` (every run's numbers) at the end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from scaleahead.commands import check_output, check_positive
from scaleahead.errors import UserError


def _sizes(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UserError(f"--sizes {text!r} is not a comma-separated list of counts.", "E.g. 1000,10000.") from exc
    if not values or min(values) < 1:
        raise UserError(f"--sizes {text!r} needs counts of at least 1.", "E.g. 1000,10000.")
    return values


def _note(name: str, s: dict[str, Any]) -> str:
    """The section's own numbers, in a few words."""
    if name == "policy_load":
        return f"accepted {s['accepted']}, rejected {s['rejected']}"
    if name == "policy_reload_unchanged":
        return f"{s['policies']} policies, changed: {'yes' if s['changed'] else 'no'}"
    if name.startswith("status_"):
        return f"PATCH {s['patches']} (cap {s['cap']}), deferred {s['deferred']}"
    if name == "read_state":
        return f"{s['workloads_read']} workloads read"
    if name in ("apply_plan", "journal"):
        skipped = ", ".join(f"{k} {v}" for k, v in s["skipped_by_reason"].items())
        extra = f" ({skipped})" if skipped else ""
        per = f"; {s['median_cpu_ms_per_action']} ms CPU/action" if name == "journal" else ""
        return (
            f"applied {s['applied']}, skipped {s['skipped']}{extra}, failed {s['failed']}; "
            f"{s['journal_transactions']} journal transactions{per}"
        )
    if name == "reconcile":
        return f"{s['rows']} rows: " + ", ".join(f"{k} {v}" for k, v in s["states"].items())
    if name == "outcomes.step":
        return f"{s['scored']} services scored (one cycle)"
    if name == "outcomes.write":
        return f"{s['rows']} rows written (one bucket)"
    if name == "outcomes.window":
        return f"{s['workloads']} workloads summed over 12 buckets"
    return ""


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.command("control-plane")
    def control_plane(
        sizes: Annotated[
            str,
            typer.Option(help="Workload counts, comma-separated (e.g. 1000,10000); each against a fresh emulator."),
        ] = "1000",
        repeat: Annotated[
            int, typer.Option(help="Runs per measurement (the median CPU and wall time are reported).")
        ] = 1,
        namespaces: Annotated[
            int, typer.Option(help="Namespaces the workloads are spread over (each with a quota and a LimitRange).")
        ] = 100,
        max_plan_age_s: Annotated[
            float,
            typer.Option(help="actuation.max_plan_age_s for the apply_plan run: a plan older than this is skipped."),
        ] = 30.0,
        json_out: Annotated[
            Path | None, typer.Option("--json", help="Write every number (each run of each section) here.")
        ] = None,
        concurrent_writes: Annotated[
            int | None,
            typer.Option(
                help="actuation.concurrent_writes for the apply_plan run: API requests in flight at once "
                "(default: the setting's default)."
            ),
        ] = None,
        api_latency_ms: Annotated[
            float,
            typer.Option(
                help="Make the emulator wait this long before it answers each request, without using CPU: the "
                "network round trip and etcd commit of a real API server (0: none)."
            ),
        ] = 0.0,
        db_url: Annotated[
            str | None,
            typer.Option(
                help="Journal apply_plan, the journal, the outcomes and reconcile in this PostgreSQL database "
                "(postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB; the user must be allowed to create schemas): "
                "each store in a fresh schema, dropped at the end. Default: SQLite files in a temporary folder."
            ),
        ] = None,
        db_latency_ms: Annotated[
            float,
            typer.Option(
                help="With --db-url: reach the server through a proxy (a child process) that adds this round trip "
                "to every request and answer, as a database on another machine would (0: none). The round trip "
                "it gives is measured and printed: its threads add a few tenths of a millisecond."
            ),
        ] = 0.0,
    ) -> None:
        """Time the control plane (policy load and reload, status publish, read_state, apply_plan,
        the journal, reconcile) at N workloads against the Kubernetes API emulator.

        The emulator (kmock, in the dev extra: pip install -e '.\\[dev]') runs in its own process,
        filled with N Deployments, N PredictiveScalingPolicy objects and N HPAs; its CPU is not
        counted. Per section: CPU of this process, wall time, API requests (by method and
        resource) and peak RSS so far. The emulator is slower than a real API server: wall
        times of API-bound sections are an upper bound.
        """
        counts = _sizes(sizes)
        check_positive("--repeat", repeat, "Give a count of 1 or more.")
        check_positive("--namespaces", namespaces, "Give a count of 1 or more.")
        check_positive("--max-plan-age-s", max_plan_age_s, "Give seconds above 0, e.g. 30.")
        check_output(json_out, "--json")
        from scaleahead.settings import MAX_CONCURRENT_WRITES, ActuationSettings

        if concurrent_writes is None:
            concurrent_writes = int(ActuationSettings.model_fields["concurrent_writes"].default)
        check_positive("--concurrent-writes", concurrent_writes, "Give a count of 1 or more (1: one at a time).")
        if concurrent_writes > MAX_CONCURRENT_WRITES:
            raise UserError(
                f"--concurrent-writes {concurrent_writes} is above {MAX_CONCURRENT_WRITES}, "
                "actuation.concurrent_writes' limit.",
                f"Give a count from 1 to {MAX_CONCURRENT_WRITES}.",
            )
        if not math.isfinite(api_latency_ms) or not 0 <= api_latency_ms <= 10_000:
            raise UserError(
                f"--api-latency-ms {api_latency_ms} is not a latency between 0 and 10,000 ms.", "Give e.g. 5."
            )
        from scaleahead.bench.control_plane import Databases, bench_control_plane, require_emulator

        if not math.isfinite(db_latency_ms) or not 0 <= db_latency_ms <= 1_000:
            raise UserError(f"--db-latency-ms {db_latency_ms} is not a latency between 0 and 1,000 ms.", "Give e.g. 1.")
        if db_latency_ms > 0 and db_url is None:
            raise UserError("--db-latency-ms needs --db-url: SQLite files have no network.", "Give --db-url too.")
        if db_url is not None:
            Databases.check(db_url, db_latency_ms / 1000.0)
        require_emulator()
        print(
            f"{'size':>6} {'section':<24} {'cpu_s':>8} {'wall_s':>8} {'requests':>8} {'rss_mb':>7}  notes", flush=True
        )

        def show(n: int, name: str, s: dict[str, Any]) -> None:
            if "median_cpu_s" not in s:  # a section of parts (outcomes: step, write, window)
                for part, sub in s.items():
                    show(n, f"{name}.{part}", sub)
                return
            print(
                f"{n:>6} {name:<24} {s['median_cpu_s']:>8.3f} {s['median_wall_s']:>8.3f} {s['requests']:>8} "
                f"{s['peak_rss_mb']:>7.1f}  {_note(name, s)}",
                flush=True,
            )

        result = bench_control_plane(
            counts,
            repeat=repeat,
            namespaces=namespaces,
            max_plan_age_s=max_plan_age_s,
            progress=show,
            concurrent_writes=concurrent_writes,
            api_latency_s=api_latency_ms / 1000.0,
            db_url=db_url,
            db_rtt_s=db_latency_ms / 1000.0,
        )
        print(f"stores: {result['params']['database']}")
        if json_out is not None:
            json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {json_out}")
