"""CLI commands for Prometheus history: ``history``, ``backfill`` and ``bench fetch``.

Also ``dry_run_from_prometheus``, which ``scaleahead plan --prometheus URL`` uses in place of a
trace. Composition root: wires the Prometheus adapter to the trace loader and the dry-run planner.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from scaleahead.commands import check_output, check_positive
from scaleahead.errors import DataError, UserError, hide_password

if TYPE_CHECKING:
    from scaleahead.planning import DryRun
    from scaleahead.policy import Policy
    from scaleahead.prometheus.client import PrometheusConfig

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: History that ``plan --prometheus`` reads before the decision time (s): 2 days.
PLAN_WINDOW_S = 2 * 86400.0


def parse_duration(text: str, option: str = "--step") -> float:
    """``10s``, ``1m``, ``1h30m``, ``250ms`` or plain seconds -> seconds."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
        if not parts or "".join(a + b for a, b in parts) != text:
            raise UserError(f"{option} {text!r} is not a duration.", "Write e.g. 10s, 1m, 1h30m or seconds.") from None
        value = sum(float(a) * _UNITS[b] for a, b in parts)
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{option} must be a positive, finite duration, got {text!r}.", "Write e.g. 10s, 1m or 1h30m.")
    return value


def check_timeout(timeout: float, option: str = "--timeout") -> float:
    """A request timeout in seconds: a finite number above 0, else a ``UserError`` naming ``option``."""
    if not math.isfinite(timeout) or timeout <= 0:
        raise UserError(f"{option} {timeout:g} is not a positive, finite number of seconds.", f"Give e.g. {option} 30.")
    return timeout


def check_history_points(t0: float, t1: float, step_s: float) -> int:
    """The rows ``history`` writes for ``[t0, t1]`` at ``step_s``; a ``UserError`` before any request when
    they are more than a series CSV may hold (``traces.MAX_GRID_STEPS``, 800 MB of values): 1900 to 9999
    at 10 s asked numpy for 190 GiB after the reads."""
    from scaleahead.traces import MAX_GRID_STEPS

    points = math.floor((t1 - t0) / step_s) + 1
    if points > MAX_GRID_STEPS:
        raise UserError(
            f"--start to --end at --step {step_s:g} s is {points:,} points; history writes at most "
            f"{MAX_GRID_STEPS:,} (a series CSV holds no more).",
            "Give a shorter range (--start, --end) or a longer --step, or split the range over several files.",
        )
    return points


def make_config(
    url: str,
    bearer_token_file: str | None = None,
    username: str | None = None,
    password_file: str | None = None,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    insecure: bool = False,
    timeout: float | None = None,
    concurrency: int | None = None,
) -> PrometheusConfig:
    """A client config from CLI options (credentials are read from files, never the command line).

    Options left out fall back to ``SCALEAHEAD_PROMETHEUS__BEARER_TOKEN_FILE``, ``__USERNAME``,
    ``__PASSWORD_FILE``, ``__CA_FILE``, ``__CERT_FILE`` and ``__KEY_FILE`` (so ``plan --prometheus``
    can reach a server that needs credentials). ``timeout`` and ``concurrency`` left out are
    ``SCALEAHEAD_PROMETHEUS__TIMEOUT_S`` and ``__MAX_CONCURRENCY`` (30 s and 8 by default), as the
    control loop reads them: ``plan --prometheus`` and ``train --prometheus`` must not wait 4 x 30 s
    for a server that does not answer when the settings say 5 s.
    """
    import os

    from scaleahead.prometheus.client import PrometheusConfig
    from scaleahead.prometheus.history import credentials
    from scaleahead.settings import Settings

    def env(name: str, given: str | None) -> str | None:
        return given if given is not None else os.environ.get(f"SCALEAHEAD_PROMETHEUS__{name}") or None

    creds = credentials(
        env("BEARER_TOKEN_FILE", bearer_token_file),
        env("USERNAME", username),
        env("PASSWORD_FILE", password_file),
        env("CA_FILE", ca_file),
        env("CERT_FILE", cert_file),
        env("KEY_FILE", key_file),
    )
    settings = Settings.from_env().prometheus  # as the control loop reads it
    return PrometheusConfig(
        url,
        **creds,
        insecure_skip_verify=insecure,
        timeout_s=settings.timeout_s if timeout is None else timeout,
        max_concurrency=settings.max_concurrency if concurrency is None else concurrency,
        accept_partial=settings.accept_partial,
    )


def dry_run_from_prometheus(
    config: PrometheusConfig,
    policies: Sequence[Policy],
    at: float | None,
    model: str,
    current_replicas: int | None,
    interval_s: float = 10.0,
) -> DryRun:
    """``scaleahead plan --prometheus``: each policy's ``demand.query`` over the 2 days before ``at``.

    Policies sharing a query and step are planned together; the plans are merged. ``at`` defaults
    to now (the wall clock: this is the composition root).
    """
    import time

    from scaleahead.planning import DryRun, dry_run
    from scaleahead.prometheus.client import PrometheusClient, PrometheusError, RangeRequest
    from scaleahead.prometheus.history import as_steps, last_point_known
    from scaleahead.types import Plan

    when = time.time() if at is None else at
    groups: dict[tuple[str, float], list[Policy]] = {}
    for p in policies:
        groups.setdefault((p.spec.demand.query, p.spec.demand.step_seconds), []).append(p)
    keys = list(groups)
    with PrometheusClient(config) as client:
        reqs = []
        for query, step in keys:
            last = last_point_known(when, step)
            label = ", ".join(str(p.workload) for p in groups[(query, step)])
            reqs.append(RangeRequest(label, query, last + step - PLAN_WINDOW_S, last, step))
        results = client.fetch_many(reqs)
    runs: list[DryRun] = []
    for key, res in zip(keys, results, strict=True):
        if isinstance(res, PrometheusError):
            raise res
        # The point at T is the step [T - step, T), known when it ends, as a trace's (as_steps).
        steps = as_steps(res)
        _check_usable(steps, when, key[0], hide_password(config.url), groups[key])
        runs.append(
            dry_run(groups[key], steps, when, model=model, current_replicas=current_replicas, interval_s=interval_s)
        )
    first = runs[0]
    merged = Plan(
        when,
        tuple(a for r in runs for a in r.plan.actions),
        {k: v for r in runs for k, v in r.plan.fallbacks.items()},
        tuple(n for r in runs for n in r.plan.notes),
    )
    forecasts = {k: v for r in runs for k, v in r.forecasts.items()}
    return DryRun(merged, forecasts, when, first.history, first.model)


def _check_usable(steps: Any, when: float, query: str, url: str, policies: Sequence[Policy]) -> None:
    """A ``DataError`` naming the query and the server when Prometheus answered with no usable value
    before ``when`` (all NaN, infinite, negative or a glitch: each counts as missing). The planner's own
    check speaks of a trace and --at, which are not the problem here."""
    from datetime import UTC, datetime

    import numpy as np

    from forecaster.base import without_glitches

    past = without_glitches(steps).known_by(when)
    if len(past) == 0 or np.isfinite(past.values).any():
        return
    workloads = ", ".join(str(p.workload) for p in policies)
    start = datetime.fromtimestamp(past.start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise DataError(
        f"Prometheus at {url} answered the demand.query {query!r} of {workloads} with no usable value from "
        f"{start} to {end}: all {len(past)} samples are missing, NaN, infinite or negative (each counts as "
        "missing; the warnings above say which).",
        "Check the query in Prometheus (it must give demand: a rate or a usage, never negative; rate() for "
        "counters, not deriv()) and that the workload had traffic then; or plan at another --at.",
    )


# Options shared by every command that reads from Prometheus.
BearerOpt = Annotated[
    str | None, typer.Option(help="File holding a bearer token (re-read per request), e.g. a service-account token.")
]
UserOpt = Annotated[str | None, typer.Option(help="Basic-auth username.")]
PasswordFileOpt = Annotated[str | None, typer.Option(help="File holding the basic-auth password.")]
CaOpt = Annotated[str | None, typer.Option(help="CA bundle (PEM) that signed the server's certificate.")]
CertOpt = Annotated[str | None, typer.Option(help="Client certificate (PEM) for mutual TLS.")]
KeyOpt = Annotated[str | None, typer.Option(help="Client certificate's private key (PEM).")]
InsecureOpt = Annotated[bool, typer.Option(help="Do not verify the server's TLS certificate (testing only).")]


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("history")
    def history_cmd(
        prometheus: Annotated[str, typer.Option(help="Base URL of Prometheus (or Thanos, Mimir, VictoriaMetrics).")],
        query: Annotated[str, typer.Option(help="PromQL giving ONE series (aggregate with sum(...) if needed).")],
        start: Annotated[str, typer.Option(help="First time (ISO-8601, UTC if no zone, or epoch s).")],
        end: Annotated[str, typer.Option(help="Last time, inclusive (ISO-8601 or epoch s).")],
        output: Annotated[Path, typer.Option(help="Series CSV to write (timestamp,value; empty = missing).")],
        step: Annotated[str, typer.Option(help="Resolution: 10s, 1m, ... (points are at multiples of it).")] = "10s",
        bearer_token_file: BearerOpt = None,
        username: UserOpt = None,
        password_file: PasswordFileOpt = None,
        ca_file: CaOpt = None,
        cert_file: CertOpt = None,
        key_file: KeyOpt = None,
        insecure: InsecureOpt = False,
        timeout: Annotated[
            float | None,
            typer.Option(
                help="Per-request timeout (s); 5xx and timeouts are retried 3 times (default: the setting "
                "prometheus.timeout_s, $SCALEAHEAD_PROMETHEUS__TIMEOUT_S, 30)."
            ),
        ] = None,
    ) -> None:
        """Dump a range of a PromQL query as a series CSV (the format of EVALUATION.md).

        Each row is a step stamped at its start, as in the traces: the row at t is the point
        Prometheus has at t + step (a point is known at its timestamp, so it is the step that
        ends there; `scaleahead backfill` writes a trace's steps that way). Long ranges are read
        in chunks under Prometheus' 11,000-points limit; gaps are written as
        empty cells. The file is written only if the whole read succeeds.
        """
        from scaleahead.cli import console, parse_time
        from scaleahead.prometheus.client import PrometheusClient, RangeRequest
        from scaleahead.prometheus.history import as_steps

        check_output(output, "--output")
        if timeout is not None:
            check_timeout(timeout)
        step_s = parse_duration(step)
        t0, t1 = parse_time(start, "--start"), parse_time(end, "--end")
        if t1 < t0:
            raise UserError(f"--end ({end}) is before --start ({start}).", "Swap them.")
        check_history_points(t0, t1, step_s)
        cfg = make_config(
            prometheus, bearer_token_file, username, password_file, ca_file, cert_file, key_file, insecure, timeout
        )
        import numpy as np

        from forecaster.base import without_glitches
        from scaleahead.types import F32_MAX

        with PrometheusClient(cfg) as client:
            # A row is a step, stamped at its start; the Prometheus point at T is the step that ends at T.
            raw = as_steps(client.range_series(RangeRequest("", query, t0 + step_s, t1 + step_s, step_s)))
        # A sample beyond float32 (1e42: an overflow in an exporter) is a glitch that every reader of
        # Prometheus takes as missing; a series CSV refuses it, so it is written as an empty cell.
        series = without_glitches(raw)
        glitches = int(np.count_nonzero(np.isfinite(raw.values) & np.isnan(series.values)))
        n = write_series_csv(output, series)
        console.print(
            f"wrote {output}: {len(series)} points ({n} present) at {step_s:g} s, {client.stats.requests} request(s)"
        )
        if glitches:
            console.print(
                f"{glitches} value(s) beyond {F32_MAX:.3g} (the float32 limit, no real demand) were written as "
                "missing (empty), as the control loop reads them."
            )

    @app.command("backfill")
    def backfill_cmd(
        trace: Annotated[str, typer.Option(help="Trace name (nasa-10s, alibaba-cpu-10s, ...) or series CSV path.")],
        tsdb: Annotated[Path, typer.Option(help="TSDB folder to create blocks in (Prometheus' --storage.tsdb.path).")],
        metric: Annotated[str, typer.Option(help="Metric name to write, e.g. http_requests_per_step.")],
        labels: Annotated[str | None, typer.Option(help="Labels k=v,k2=v2 for the series.")] = None,
        column: Annotated[str | None, typer.Option(help="Value column of a series CSV.")] = None,
        start: Annotated[str | None, typer.Option(help="Backfill only from this time (ISO-8601 or epoch s).")] = None,
        end: Annotated[str | None, typer.Option(help="Backfill only before this time (ISO-8601 or epoch s).")] = None,
        serve: Annotated[bool, typer.Option(help="Then serve the TSDB with a local Prometheus until Ctrl-C.")] = False,
        port: Annotated[int, typer.Option(help="Port of the local Prometheus (127.0.0.1 only).")] = 9090,
    ) -> None:
        """Turn a trace into a Prometheus TSDB with promtool; --serve starts Prometheus over it.

        Missing points stay gaps. The served Prometheus listens on 127.0.0.1 only, never scrapes,
        and uses a lookback of half the trace's step so that gaps read back as gaps.
        """
        from rich.markup import escape

        from scaleahead.cli import console, iso, parse_time
        from scaleahead.prometheus.backfill import LocalPrometheus, backfill, check_metric_name, parse_labels
        from scaleahead.traces import load_series

        check_metric_name(metric)
        if serve and not 1 <= port <= 65535:  # checked now, not after the backfill
            raise UserError(f"--port {port} is not a TCP port.", "Give a port from 1 to 65535, e.g. 9090.")
        if tsdb.exists() and not tsdb.is_dir():
            raise UserError(f"--tsdb {tsdb} is a file.", "Give a folder (it is created if missing).")
        label_map = parse_labels(labels)
        t0 = parse_time(start, "--start") if start else None
        t1 = parse_time(end, "--end") if end else None
        series = load_series(trace, column=column)
        if t0 is not None or t1 is not None:
            series = series.between(series.start if t0 is None else t0, series.end if t1 is None else t1)
            if len(series) == 0:
                raise UserError("--start/--end leave no points of the trace.", "Choose a range inside the trace.")
        if tsdb.exists() and any(p.name != "wal" for p in tsdb.iterdir()) and not serve:
            note = f"{escape(str(tsdb))} is not empty; new blocks are added beside the existing ones"
            console.print(f"[yellow]note[/] {note}")
        n = backfill(tsdb, metric, [(label_map, series)])
        matchers = ",".join(f'{k}="{v}"' for k, v in label_map.items())
        selector = f"{metric}{{{matchers}}}" if matchers else metric
        console.print(
            f"backfilled {n} samples of {selector} from {iso(series.start)} to {iso(series.end)} "
            f"(step {series.step_s:g} s) into {tsdb}"
        )
        if not serve:
            return
        import signal
        import threading

        # Handlers go in before the server starts: a SIGTERM that comes as soon as Prometheus is
        # ready must still stop it, not leave it running without its parent.
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # installed explicitly: a background job ignores SIGINT
            signal.signal(sig, lambda *_: stop.set())
        server = LocalPrometheus(tsdb, port, lookback_s=series.step_s / 2).start()
        console.print(
            f"Prometheus is serving {tsdb} at {server.url} (Ctrl-C or SIGTERM stops it). Try:\n"
            f"  scaleahead history --prometheus {server.url} --query '{selector}' "
            f"--start {iso(series.start)} --end {iso(series.end - series.step_s)} "
            f"--step {series.step_s:g}s --output /tmp/history.csv"
        )
        import sys

        sys.stdout.flush()  # the address must show even when stdout is a pipe
        try:
            while not stop.is_set() and server.proc is not None and server.proc.poll() is None:
                stop.wait(0.5)
        finally:
            server.stop()
        console.print("Prometheus stopped")

    @bench_app.command("fetch")
    def bench_fetch(
        tsdb: Annotated[
            Path | None,
            typer.Option(help="TSDB folder, backfilled on first use and reused after (default: under ~/.cache)."),
        ] = None,
        series: Annotated[int, typer.Option(help="Number of series (workloads).")] = 1000,
        days: Annotated[float, typer.Option(help="Days of 10 s history per series.")] = 1.0,
        concurrency: Annotated[int, typer.Option(help="Parallel range queries.")] = 8,
        compress: Annotated[bool, typer.Option(help="Ask for gzip (Accept-Encoding) instead of identity.")] = False,
        repeats: Annotated[int, typer.Option(help="Cold loads and incremental cycles to take the median of.")] = 3,
        compare: Annotated[bool, typer.Option(help="Also time the same reads with prometheus-api-client.")] = False,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the result object here.")] = None,
    ) -> None:
        """Time history reads from a real local Prometheus: a cold load and an incremental cycle.

        fetch_s: N series x 1 day at 10 s through the history source (target <= 30 s for 1,000);
        incremental_ms: the next cycle, reading only new points (target <= 1,000 ms for 1,000).
        The first run backfills the TSDB with promtool (backfill_s; slow for 1,000 series).
        """
        from scaleahead.bench.prometheus import run_fetch_bench
        from scaleahead.cli import console

        # Checked before the TSDB folder is made or backfilled (a 1000 x 1 d backfill takes minutes).
        check_positive("--series", series, "Give a count of series, e.g. 1000.")
        check_positive("--days", days, "Give the days of 10 s history per series, e.g. 1.")
        if days * 86400 < 10:
            raise UserError(f"--days {days:g} holds no 10 s step of history.", "Give e.g. 1.")
        check_positive("--concurrency", concurrency, "Give a count of parallel range queries, e.g. 8.")
        check_positive("--repeats", repeats, "Give a count of runs, e.g. 3.")
        check_output(json_out, "--json")
        if tsdb is None:
            import os

            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            tsdb = cache / "scaleahead" / f"bench-tsdb-{series}x{days:g}d"
        result = run_fetch_bench(tsdb, series, days, concurrency, compress, repeats, compare)
        console.print_json(json.dumps(result))
        if json_out is not None:
            json_out.write_text(json.dumps(result, indent=2) + "\n")


def write_series_csv(path: Path, series: Any) -> int:
    """``timestamp,value`` rows (ISO-8601 UTC, or epoch seconds for sub-second steps; an empty value is
    missing); returns how many values are present."""
    import math
    from datetime import UTC, datetime

    rows = ["timestamp,value\n"]
    present = 0
    times = series.times()
    whole = bool((times == times.round()).all())  # sub-second steps: epoch seconds keep them exact
    for t, v in zip(times.tolist(), series.values.tolist(), strict=True):
        # (sub-second: to the microsecond, not 804571259.9999999 from the float grid)
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if whole else repr(round(t, 6))
        if math.isfinite(v):
            present += 1
            rows.append(f"{stamp},{int(v) if float(v).is_integer() else repr(v)}\n")
        else:
            rows.append(f"{stamp},\n")
    import stat

    text = "".join(rows)
    # A symlink's target is written, not the link replaced; a device or pipe (/dev/stdout, a
    # process substitution) is written in place, as check_output promises; a regular file through
    # a temporary file renamed over it, so no half-written CSV is left (until 2026-12-07 every path
    # was replaced: /dev/stdout became a file when run as root, a symlink a copy: a review).
    target = path.resolve() if path.is_symlink() else path
    tmp = target.with_name(target.name + ".tmp")
    try:
        if target.exists() and not stat.S_ISREG(target.stat().st_mode):
            with open(target, "w", encoding="utf-8") as out:
                out.write(text)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"Cannot write {path}: {exc.strerror}.", "Check the folder exists and is writable.") from exc
    return present
