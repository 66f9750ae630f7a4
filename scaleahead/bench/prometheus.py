"""``scaleahead bench fetch``: history reads from a real local Prometheus (EVALUATION.md section 6).

Measures ``fetch_s`` (N series x 1 day at 10 s, a cold first load through ``PrometheusHistory``)
and ``incremental_ms`` (the next cycle for the same N series: only new points). The history is a
real trace: series ``i`` is nasa-10s shifted by ``i`` x 40 minutes, all on one day, so no two
series are equal. The TSDB is backfilled once with promtool (timed as ``backfill_s``) and reused.

Composition root: wires the trace loader, the backfill and the history source; call
``run_fetch_bench`` from ``bench speed``.
"""

from __future__ import annotations

import gc
import socket
import statistics
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scaleahead.errors import DataError
from scaleahead.policy import Policy, parse_policies
from scaleahead.prometheus.backfill import LocalPrometheus, backfill
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig
from scaleahead.prometheus.history import PrometheusHistory
from scaleahead.traces import load_series
from scaleahead.types import Series

DAY_S = 86400.0
METRIC = "bench_requests"
#: Shift between consecutive bench series (steps of 10 s): 40 minutes.
SHIFT_STEPS = 240
#: Extra history after the first day, so that incremental cycles find new points (s).
EXTRA_S = 3600.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_series(
    n: int, days: float = 1.0, trace: str = "nasa-10s"
) -> tuple[float, Iterator[tuple[dict[str, str], Series]]]:
    """``n`` real series on one time grid: the trace's longest gap-free stretch, shifted per series."""
    s = load_series(trace)
    if s.step_s != 10.0:
        raise DataError(f"The fetch bench needs a 10 s trace; {trace} has {s.step_s:g} s.", "Use nasa-10s.")
    finite = np.isfinite(s.values)
    edges = np.diff(np.r_[0, finite.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    k = int(np.argmax(ends - starts))
    i0, i1 = int(starts[k]), int(ends[k])
    length = int((days * DAY_S + EXTRA_S) / s.step_s)
    if i0 + (n - 1) * SHIFT_STEPS + length > i1:
        raise DataError(f"{trace} is too short for {n} shifted series of {days:g} day(s).", "Use fewer series.")
    t0 = s.start + i0 * s.step_s

    def gen() -> Iterator[tuple[dict[str, str], Series]]:
        for i in range(n):
            j = i0 + i * SHIFT_STEPS
            yield {"workload": f"w{i:05d}"}, Series(f"w{i:05d}", t0, s.step_s, s.values[j : j + length])

    return t0, gen()


def bench_policies(n: int) -> list[Policy]:
    docs = []
    for i in range(n):
        docs.append(
            "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\n"
            f"metadata: {{name: w{i:05d}}}\n"
            f"spec: {{target: {{name: w{i:05d}}}, capacityPerReplica: 10, "
            f"demand: {{query: '{METRIC}{{workload=\"w{i:05d}\"}}', stepSeconds: 10}}}}\n"
        )
    return parse_policies("---\n".join(docs), "<bench>")


def ensure_tsdb(tsdb: Path, n: int, days: float) -> tuple[float, float | None]:
    """Backfill ``tsdb`` unless it already holds this bench; returns (t0, backfill seconds or None)."""
    marker = tsdb / f".scaleahead-bench-{n}x{days:g}d"
    t0, series = bench_series(n, days)
    if marker.exists():
        return t0, None
    tsdb.mkdir(parents=True, exist_ok=True)
    if any(tsdb.iterdir()):
        raise DataError(f"{tsdb} is not empty and was not made by this bench.", "Give an empty or new --tsdb folder.")
    began = time.perf_counter()
    backfill(tsdb, METRIC, series, max_block_duration="24h")
    took = time.perf_counter() - began
    marker.write_text(f"{took:.3f}\n")
    return t0, took


def run_fetch_bench(
    tsdb: Path,
    n: int = 1000,
    days: float = 1.0,
    concurrency: int = 8,
    compress: bool = False,
    repeats: int = 3,
    compare_api_client: bool = False,
) -> dict[str, Any]:
    """Backfill (once), start a local Prometheus, time a cold load and incremental cycles.

    Returns:
        ``{"fetch_s", "incremental_ms", "backfill_s", "points", "bytes", "requests", "params"}``;
        ``fetch_s`` is the median over ``repeats`` cold loads, ``incremental_ms`` the median of
        ``repeats`` consecutive cycles 10 s apart.
    """
    t0, took = ensure_tsdb(tsdb, n, days)
    policies = bench_policies(n)
    now = t0 + days * DAY_S
    result: dict[str, Any] = {"n_series": n, "days": days, "backfill_s": took}
    with LocalPrometheus(tsdb, free_port(), lookback_s=5.0) as server:
        cfg = PrometheusConfig(server.url, max_concurrency=concurrency, compress=compress)
        loads: list[float] = []
        cycles: list[float] = []
        stats: Mapping[str, int] = {}
        for r in range(repeats):
            with PrometheusClient(cfg) as client:
                history = PrometheusHistory(client, window_s=days * DAY_S)
                gc.collect()
                began = time.perf_counter()
                got = history.read(policies, now)
                loads.append(time.perf_counter() - began)
                if len(got) != n:
                    raise DataError(f"Bench read {len(got)} of {n} series: {next(iter(history.errors.values()), '')}")
                if r == 0:
                    points = sum(int(np.isfinite(s.values).sum()) for s in got.values())
                    stats = {"points": points, "bytes": client.stats.bytes, "requests": client.stats.requests}
                before = client.stats.requests
                for c in range(1, repeats + 1):
                    began = time.perf_counter()
                    history.read(policies, now + c * 10.0)
                    cycles.append((time.perf_counter() - began) * 1000.0)
                if r == 0:
                    result["incremental_requests"] = (client.stats.requests - before) // repeats
        result.update(stats)
        result["fetch_s"] = round(statistics.median(loads), 3)
        result["fetch_s_runs"] = [round(x, 3) for x in loads]
        result["incremental_ms"] = round(statistics.median(cycles), 1)
        result["incremental_ms_runs"] = [round(x, 1) for x in cycles]
        if compare_api_client:
            result["compare"] = _compare(server.url, policies, now, days, concurrency, repeats)
    result["params"] = {"concurrency": concurrency, "compress": compress, "repeats": repeats}
    return result


def _compare(
    url: str, policies: list[Policy], now: float, days: float, concurrency: int, repeats: int
) -> dict[str, Any]:
    """The ADR 0001 comparison: cold loads direct (identity, gzip) vs prometheus-api-client, and
    an incremental cycle with and without batching; runs interleaved, ``repeats`` times each."""
    from scaleahead.prometheus.client import fetch_with_prometheus_api_client

    queries = [p.spec.demand.query for p in policies]
    start, end = now - days * DAY_S, now - 10.0
    runs: dict[str, list[float]] = {
        "direct_identity_s": [],
        "direct_gzip_s": [],
        "prometheus_api_client_s": [],
        "incremental_batched_ms": [],
        "incremental_unbatched_ms": [],
    }
    for _ in range(repeats):
        for compress in (False, True):
            with PrometheusClient(PrometheusConfig(url, max_concurrency=concurrency, compress=compress)) as client:
                gc.collect()
                began = time.perf_counter()
                PrometheusHistory(client, window_s=days * DAY_S).read(policies, now)
                runs["direct_gzip_s" if compress else "direct_identity_s"].append(time.perf_counter() - began)
        gc.collect()
        began = time.perf_counter()
        fetch_with_prometheus_api_client(url, queries, start, end, 10.0, concurrency)
        runs["prometheus_api_client_s"].append(time.perf_counter() - began)
        for batch in (50, 1):
            with PrometheusClient(PrometheusConfig(url, max_concurrency=concurrency, batch_size=batch)) as client:
                history = PrometheusHistory(client, window_s=3600.0)
                history.read(policies, now)
                began = time.perf_counter()
                history.read(policies, now + 10.0)
                key = "incremental_batched_ms" if batch > 1 else "incremental_unbatched_ms"
                runs[key].append((time.perf_counter() - began) * 1000.0)
    return {k: {"median": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]} for k, v in runs.items()}
