"""What the daemon tells the outside: Prometheus metrics, health endpoints and JSON logs.

A platform team trusts an autoscaler it can watch. ``Metrics`` turns each ``CycleReport`` into
gauges and counters (forecast per workload so a Grafana panel can overlay it on the observed
demand, planned and current replicas, actions by kind and result, fallbacks, phase latencies,
model version, live forecast error); ``serve`` answers ``/metrics``, ``/healthz`` and
``/readyz`` on one port; ``JsonFormatter`` writes one JSON object per log line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from scaleahead.errors import UserError
from scaleahead.listen import listen_host, server_class
from scaleahead.types import ScaleTo, SetWarmPool, WorkloadRef

#: Quantiles exported per workload, and the leads (s after the origin) at which they are exported.
EXPORTED_QUANTILES = (0.5, 0.9)
EXPORTED_LEADS_S = (60.0, 300.0, 900.0)

#: Label values of the counters, exported at 0 from the start.
CYCLE_RESULTS = ("ok", "error", "standby")
ACTION_KINDS = ("ScaleTo", "SetWarmPool", "MovePod")
ACTION_RESULTS = ("applied", "failed", "skipped", "dry-run")
JOB_RESULTS = ("ok", "error")
#: Why a policy object is not planned (its Accepted condition's reason), exported at 0 from the start.
REJECTION_REASONS = ("InvalidSpec", "DuplicateTarget", "Refused", "ConflictingAutoscaler")
#: Results of a policy status write: ok, or failed by HTTP status class (other: no answer).
STATUS_WRITE_RESULTS = ("ok", "failed_4xx", "failed_5xx", "failed_other")
#: Why a workload's field is left to another writer (``scaleahead_workload_held``).
HELD_CAUSES = ("human_edit", "co_writer")

#: Up to 5 minutes: a phase stalled on a slow Prometheus or database (30-150 s, the stalls that
#: trip the liveness probe) shows on the p95 panels instead of in +Inf (a review of 2026-12-07).
_PHASE_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)


class Metrics:
    """All metrics of one daemon, in their own registry (so tests can run several daemons)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.forecast = Gauge(
            "scaleahead_forecast",
            "Forecast demand of a workload, by quantile and lead time (s after the forecast origin). "
            "Overlay with `offset` equal to the lead on scaleahead_observed_demand.",
            ["workload", "quantile", "lead_s"],
            registry=r,
        )
        self.forecast_peak = Gauge(
            "scaleahead_forecast_peak",
            "The forecast peak the planner provisioned for (policy quantile, over the start-up window).",
            ["workload"],
            registry=r,
        )
        self.observed = Gauge(
            "scaleahead_observed_demand",
            "Latest observed demand of a workload (policy unit).",
            ["workload"],
            registry=r,
        )
        self.planned = Gauge(
            "scaleahead_planned_replicas", "Replicas the last plan asked for.", ["workload"], registry=r
        )
        self.current = Gauge("scaleahead_current_replicas", "Replicas the cluster reported.", ["workload"], registry=r)
        self.slo_risk = Gauge(
            "scaleahead_slo_risk",
            "objective.sloRisk the service was planned with this cycle (raised by the risk adaptation).",
            ["workload"],
            registry=r,
        )
        self.actions = Counter(
            "scaleahead_actions",
            "Planned changes by kind and result (applied, failed, skipped, dry-run); no-ops are not counted.",
            ["kind", "result"],
            registry=r,
        )
        self.fallback = Gauge(
            "scaleahead_fallback_active",
            "1 while a workload is in a fallback mode (reactive, current, static).",
            ["workload", "mode"],
            registry=r,
        )
        self.fallbacks = Counter("scaleahead_fallbacks", "Fallback decisions by mode.", ["mode"], registry=r)
        self.phase = Histogram(
            "scaleahead_phase_seconds",
            "Duration of each phase of a control cycle.",
            ["phase"],
            buckets=_PHASE_BUCKETS,
            registry=r,
        )
        self.cycle = Histogram(
            "scaleahead_cycle_seconds", "Duration of a whole control cycle.", buckets=_PHASE_BUCKETS, registry=r
        )
        self.lateness = Histogram(
            "scaleahead_tick_lateness_seconds",
            "How late a tick started after its scheduled time.",
            buckets=_PHASE_BUCKETS,
            registry=r,
        )
        self.cycles = Counter(
            "scaleahead_cycles", "Control cycles by result (ok, error, standby).", ["result"], registry=r
        )
        self.last_cycle = Gauge(
            "scaleahead_last_cycle_timestamp_seconds", "When the last cycle ran (epoch s).", registry=r
        )
        self.workload_errors = Counter(
            "scaleahead_workload_errors",
            "Per-workload errors (history, forecast, action).",
            ["workload", "stage"],
            registry=r,
        )
        self.backoff = Gauge(
            "scaleahead_workload_backoff_seconds",
            "Remaining back-off of a workload after errors (0: in the loop).",
            ["workload"],
            registry=r,
        )
        self.model = Gauge(
            "scaleahead_model_info",
            "The production forecaster: 1 for its name and version.",
            ["model", "version"],
            registry=r,
        )
        self.model_fallback = Gauge(
            "scaleahead_model_fallback",
            "1 while the fallback baseline forecasts instead of the configured learned model (label configured: "
            "forecast.model; reason: no_model, none registered yet, or unloadable, the champion's checkpoint "
            "could not be loaded); no series otherwise.",
            ["configured", "reason"],
            registry=r,
        )
        self.live_error = Gauge(
            "scaleahead_live_forecast_error",
            "Live forecast error: WAPE of the median over matured forecasts (exponentially weighted).",
            ["workload"],
            registry=r,
        )
        self.live_error_all = Gauge(
            "scaleahead_live_forecast_error_overall", "Median over workloads of the live forecast error.", registry=r
        )
        self.live_error_all.set(float("nan"))  # no error measured yet (not 0 %) until a forecast matures
        # The job's name is ``job_name``, not ``job``: Prometheus owns ``job`` (the scrape job) and
        # would rename ours to ``exported_job``.
        self.jobs = Counter(
            "scaleahead_job_runs",
            "Scheduled job runs by job and result (ok, error).",
            ["job_name", "result"],
            registry=r,
        )
        self.job_last_run = Gauge(
            "scaleahead_job_last_run_timestamp_seconds",
            "When a scheduled job last ended, by job and result (ok, error; epoch s).",
            ["job_name", "result"],
            registry=r,
        )
        self.leader = Gauge("scaleahead_leader", "1 while this replica holds the leader lease.", registry=r)
        self.workloads = Gauge("scaleahead_workloads", "Workloads under a policy.", registry=r)
        self.unresolved = Gauge(
            "scaleahead_actions_unresolved",
            "Journaled actions this leader's last reconciliation left 'planned': their objects could not be "
            "read (a 5xx, a 429, a timeout); reconciled again every actuation.reconcile_retry_s. After a failed "
            "cycle, until a reconciliation succeeds: the rows its plan could not settle.",
            registry=r,
        )
        # Which shard this replica serves (`run --shard i/N`; 0 and 1 without): alert
        # ScaleaheadShardMissing counts the shards seen against the count any replica exports.
        self.shard_index = Gauge("scaleahead_shard_index", "This replica's shard (run --shard i/N: i).", registry=r)
        self.shard_count = Gauge(
            "scaleahead_shard_count", "Shards the workloads are split into (run --shard i/N: N).", registry=r
        )
        self.shard_count.set(1)
        self.webhook_reviews = Counter(
            "scaleahead_webhook_reviews",
            "Pod steering webhook reviews by result: steered, passed (no steer for the pod), errors "
            "(allowed unchanged: a malformed review, the database unreachable or too slow).",
            ["result"],
            registry=r,
        )

        self.webhook_refused = Counter(
            "scaleahead_webhook_clients_refused",
            "Connections to the pod steering webhook refused at TLS (no client certificate signed by "
            "webhook.client_ca_file, or not naming webhook.client_name): their pods are created unsteered.",
            registry=r,
        )
        self.leader_transitions = Counter(
            "scaleahead_leader_transitions",
            "Times this replica started (to=leader) or stopped (to=standby) holding the leader lease.",
            ["to"],
            registry=r,
        )
        self.policies_rejected = Gauge(
            "scaleahead_policies_rejected",
            "PredictiveScalingPolicy objects not planned at the last policy load, by their Accepted "
            "condition's reason (InvalidSpec, DuplicateTarget, Refused, ConflictingAutoscaler).",
            ["reason"],
            registry=r,
        )
        self.autoscaler_check_up = Gauge(
            "scaleahead_autoscaler_check_up",
            "0 while the last list of HorizontalPodAutoscalers failed (policies that would fight one are "
            "judged on the last list read), else 1.",
            registry=r,
        )
        self.status_writes = Counter(
            "scaleahead_status_writes",
            "PredictiveScalingPolicy status writes by result: ok, or failed with the HTTP status class "
            "(failed_4xx, failed_5xx) or failed_other (no answer).",
            ["result"],
            registry=r,
        )
        self.workload_held = Gauge(
            "scaleahead_workload_held",
            "1 while a workload's field is left to another writer: cause human_edit (an edit respected for "
            "actuation.human_edit_hold_s) or co_writer (a writer that keeps undoing scaleahead's writes).",
            ["workload", "cause"],
            registry=r,
        )
        self.drain_fence_until = Gauge(
            "scaleahead_drain_fence_until_seconds",
            "Unix time until which a node is fenced for a drain (taint scaleahead.io/draining, "
            "actuation.drain_fence_s), as the leader knows it (0: no readable time); no series once lifted.",
            ["node"],
            registry=r,
        )
        self._fence_nodes: set[str] = set()

        # The workloads whose forecast and sloRisk the last cycle exported (``observe_cycle``).
        self._forecast_keys: set[str] = set()
        self._risk_keys: set[str] = set()

        # Counters a rule takes rate() or increase() of exist from the start at 0, so that the first
        # error is an increase (a series that appears at 1 has none).
        for result in CYCLE_RESULTS:
            self.cycles.labels(result=result)
        for kind in ACTION_KINDS:
            for outcome in ACTION_RESULTS:
                self.actions.labels(kind=kind, result=outcome)
        for result in ("steered", "passed", "errors"):
            self.webhook_reviews.labels(result=result)
        for to in ("leader", "standby"):
            self.leader_transitions.labels(to=to)
        for result in STATUS_WRITE_RESULTS:
            self.status_writes.labels(result=result)
        for reason in REJECTION_REASONS:
            self.policies_rejected.labels(reason=reason).set(0)
        self.autoscaler_check_up.set(1)

    def policies_loaded(self, rejected: Mapping[str, int], autoscaler_check_up: bool | None) -> None:
        """After a policy load: the objects not planned by reason, and whether the HPA list is read
        (None: no check, or it did not run)."""
        for reason in {*REJECTION_REASONS, *rejected}:
            self.policies_rejected.labels(reason=reason).set(rejected.get(reason, 0))
        if autoscaler_check_up is not None:
            self.autoscaler_check_up.set(1 if autoscaler_check_up else 0)

    def status_written(self, result: str) -> None:
        """Count one policy status write (``STATUS_WRITE_RESULTS``)."""
        self.status_writes.labels(result=result).inc()

    def observe_held(self, held: Mapping[str, str], workloads: Iterable[str]) -> None:
        """``held``: workload key -> cause (human_edit, co_writer) of the workloads whose field is left to
        another writer now: 1 for that cause; every other of ``workloads`` has no series (most never
        are held: two series per workload would be mostly zeros)."""
        for key in workloads:
            for cause in HELD_CAUSES:
                if held.get(key) == cause:
                    self.workload_held.labels(workload=key, cause=cause).set(1.0)
                else:
                    _remove(self.workload_held, key, cause)

    def observe_fences(self, fences: Mapping[str, float]) -> None:
        """``fences``: node -> the Unix time its drain fence lasts until. A node no longer fenced has
        no series (an alert compares the times with ``time()``: a fence far past its time is stuck)."""
        for node in self._fence_nodes - set(fences):
            _remove(self.drain_fence_until, node)
        for node, until in fences.items():
            self.drain_fence_until.labels(node=node).set(float(until))
        self._fence_nodes = set(fences)

    def add_job(self, name: str) -> None:
        """Export a scheduled job's run counters at 0 before its first run."""
        for result in JOB_RESULTS:
            self.jobs.labels(job_name=name, result=result)

    def job_ended(self, name: str, result: str, now: float) -> None:
        """Count one run of a job that ended at ``now`` with ``result`` (ok or error)."""
        self.jobs.labels(job_name=name, result=result).inc()
        self.job_last_run.labels(job_name=name, result=result).set(now)

    def set_fallback(self, configured: str, reason: str | None) -> None:
        """``scaleahead_model_fallback``: ``reason`` (``no_model``, ``unloadable``) while the fallback
        runs instead of the configured learned model ``configured``; None clears it. Until 2026-12-06
        only ``scaleahead_model_info`` told, and a fallback looked the same there as a baseline
        configured on purpose (``version="unregistered"``)."""
        self.model_fallback.clear()
        if reason is not None:
            self.model_fallback.labels(configured=configured, reason=reason).set(1)

    def set_model(self, name: str, version: int | None) -> None:
        self.model.clear()
        self.model.labels(model=name, version=str(version) if version is not None else "unregistered").set(1)

    def observe_cycle(self, report: Any, lateness_s: float, state_replicas: Mapping[WorkloadRef, int]) -> None:
        """Update everything a ``CycleReport`` tells (``report`` is ``scaleahead.loop.CycleReport``)."""
        self.lateness.observe(max(0.0, lateness_s))
        total = 0.0
        for phase, ms in report.phase_ms.items():
            self.phase.labels(phase=phase).observe(ms / 1000.0)
            total += ms
        self.cycle.observe(total / 1000.0)
        self.last_cycle.set(report.now)
        forecast_keys: set[str] = set()
        for ref, fc in report.forecasts.items():
            key = ref.key
            forecast_keys.add(key)
            for q in EXPORTED_QUANTILES:
                values = fc.quantile(q)
                for lead in EXPORTED_LEADS_S:
                    i = min(len(values) - 1, max(0, int(lead / fc.step_s) - 1))
                    self.forecast.labels(workload=key, quantile=f"{q:g}", lead_s=f"{lead:g}").set(float(values[i]))
        # A workload without a forecast this cycle (its history failed, it backs off: a fallback) has
        # no forecast series, not the last one's frozen; nor one not planned with an adapted sloRisk.
        for key in self._forecast_keys - forecast_keys:
            for q in EXPORTED_QUANTILES:
                for lead in EXPORTED_LEADS_S:
                    _remove(self.forecast, key, f"{q:g}", f"{lead:g}")
        self._forecast_keys = forecast_keys
        for ref, n in state_replicas.items():
            self.current.labels(workload=ref.key).set(n)
        # A workload whose state could not be read (the loop's stage "state") has no current count
        # now: its series goes, not the last read frozen; it comes back with the next read.
        for key, why in report.errors.items():
            if why.startswith("state: "):
                _remove(self.current, key)
                # not planned this cycle: no planned count, peak or fallback mode now either
                _remove(self.planned, key)
                _remove(self.forecast_peak, key)
                for mode in ("reactive", "current", "static"):
                    _remove(self.fallback, key, mode)
        risk_keys: set[str] = set()
        for ref, weight in report.slo_risk.items():
            risk_keys.add(ref.key)
            self.slo_risk.labels(workload=ref.key).set(weight)
        for key in self._risk_keys - risk_keys:
            _remove(self.slo_risk, key)
        self._risk_keys = risk_keys
        active: dict[str, str] = {ref.key: mode for ref, mode in report.plan.fallbacks.items()}
        for action in report.plan.actions:
            if isinstance(action, ScaleTo):
                key = action.workload.key
                self.planned.labels(workload=key).set(action.to_replicas)
                peak = action.reason.details.get("forecast_peak")
                if isinstance(peak, int | float) and math.isfinite(peak):
                    self.forecast_peak.labels(workload=key).set(float(peak))
                else:  # a fallback: no peak now, not the last one's
                    _remove(self.forecast_peak, key)
            if isinstance(action, ScaleTo | SetWarmPool):  # a function's warm pool falls back too
                key = action.workload.key
                for mode in ("reactive", "current", "static"):
                    self.fallback.labels(workload=key, mode=mode).set(1.0 if active.get(key) == mode else 0.0)
        for mode in active.values():
            self.fallbacks.labels(mode=mode).inc()
        for res in report.results:
            if res.action.is_noop:  # nothing to change: no API call, not journaled, not an action taken or skipped
                continue
            self.actions.labels(kind=res.action.kind, result=res.outcome).inc()

    def forget_observed(self, workloads: set[str]) -> None:
        """Drop ``workloads``' observed demand (no sample read this cycle)."""
        for key in workloads:
            _remove(self.observed, key)

    def forget(self, workloads: set[str]) -> None:
        """Drop every per-workload series of ``workloads`` (their policies were removed)."""
        self._forecast_keys -= workloads
        self._risk_keys -= workloads
        for gauge in (
            self.forecast, self.forecast_peak, self.observed, self.planned, self.current, self.slo_risk,
            self.fallback, self.backoff, self.live_error, self.workload_errors, self.workload_held,
        ):  # fmt: skip
            names = list(gauge._labelnames)
            for metric in gauge.collect():
                for sample in metric.samples:
                    if sample.labels.get("workload") in workloads:
                        _remove(gauge, *(sample.labels[n] for n in names))

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


def _remove(gauge: Gauge | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


@dataclass
class Health:
    """Liveness and readiness, updated by the daemon and read by the HTTP handler.

    Live: the loop ticked within ``stale_after_s`` of its last tick or, while it backs off after a
    failed cycle, of the tick it scheduled (a deliberate wait of up to ``loop.max_backoff_s`` is not
    a hang). Ready: policies loaded, storage open and one cycle (or, on a standby replica, one
    leadership check) done.
    """

    stale_after_s: float
    now: Callable[[], float]
    last_tick: float | None = None
    next_tick: float | None = None
    ready: bool = False
    reasons: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set by SIGTERM/SIGINT: not ready from then on, whatever the cycle in flight reports.
    stopping: bool = False

    def tick(self, t: float) -> None:
        with self.lock:
            self.last_tick = t

    def schedule(self, t: float) -> None:
        """The loop's next tick is due at ``t``: it is not late before then."""
        with self.lock:
            self.next_tick = t

    def set_ready(self, ready: bool, why: str = "") -> None:
        with self.lock:
            if self.stopping:
                return
            self.ready = ready
            if why:
                self.reasons["ready"] = why

    def shutting_down(self) -> None:
        """Not ready from now on (a signal to stop): the Service stops sending to this replica while
        the cycle in flight and the jobs finish (until 2026-12-07 /readyz said 200 for that whole
        time, up to the 40 s job wait: a review of in-cluster operation)."""
        with self.lock:
            self.ready = False
            self.stopping = True
            self.reasons["ready"] = "shutting down"

    def liveness(self) -> tuple[bool, str]:
        with self.lock:
            if self.last_tick is None:
                return True, "starting"
            now = self.now()
            age = now - self.last_tick
            late = now - max(self.last_tick, self.next_tick if self.next_tick is not None else self.last_tick)
            if late > self.stale_after_s:
                return False, f"no control tick for {age:.0f} s (limit {self.stale_after_s:.0f} s)"
            nxt = self.next_tick
            if nxt is not None and nxt - now > self.stale_after_s:
                return True, f"last tick {age:.1f} s ago; the next in {nxt - now:.0f} s (backing off after a failure)"
            return True, f"last tick {age:.1f} s ago"

    def readiness(self) -> tuple[bool, str]:
        with self.lock:
            return self.ready, self.reasons.get("ready", "ready" if self.ready else "starting")


class _Handler(BaseHTTPRequestHandler):
    metrics: Metrics
    health: Health
    # A client that sends nothing (a half-open connection) gives up its thread after this long;
    # without it each held one thread for ever, and enough of them starved the liveness probe.
    timeout = 10.0

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = self.metrics.render()
            self._send(200, body, CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok, why = self.health.liveness()
            self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
        elif path == "/readyz":
            ok, why = self.health.readiness()
            self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
        else:
            self._send(404, b"not found: try /metrics, /healthz, /readyz\n", "text/plain")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
        logging.getLogger("scaleahead.http").debug(format, *args)


def serve(metrics: Metrics, health: Health, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; ``server.server_address`` has the bound port."""
    handler = type("Handler", (_Handler,), {"metrics": metrics, "health": health})
    try:
        server = server_class(ThreadingHTTPServer, host)((listen_host(host), port), handler)
    except OSError as exc:  # a port in use, an address this host does not have: one paragraph, exit 2
        raise UserError(
            f"Cannot serve /metrics, /healthz and /readyz on {host}:{port}: {exc.strerror or exc}.",
            "Give a free --port (0: any), or set server.host / server.port; --no-server serves none.",
        ) from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="scaleahead-http", daemon=True).start()
    return server


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any ``extra={...}`` fields."""

    _STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in self._STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message`` and then the ``extra={...}`` fields as ``key=value`` (a value
    with a space, quote or ``=``, or not a string, as JSON), so that ``--log-format text`` keeps what
    the JSON lines hold (until 2026-12-06 a cycle's line was just "cycle": docs audit)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = []
        for key, value in record.__dict__.items():
            if key in JsonFormatter._STANDARD or key.startswith("_"):
                continue
            plain = isinstance(value, str) and value and not any(c in value for c in ' "=\n')
            fields.append(f"{key}={value if plain else json.dumps(value, default=str)}")
        if not fields:
            return line
        head, sep, tail = line.partition("\n")  # a traceback stays below the line
        return f"{head} {' '.join(fields)}{sep}{tail}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to ``sys.stderr`` as it is when a record is emitted (as logging's
    own last-resort handler does), not the stream it was when configured: a command run in-process
    after another (tests, embedding) never writes to a stream that has been closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(fmt: str = "json", level: str = "INFO") -> None:
    """Route all logs to stderr as JSON lines (or plain text)."""
    handler = _StderrHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
