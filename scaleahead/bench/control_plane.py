"""``scaleahead bench control-plane``: the control plane's cost at 1,000-10,000 workloads.

Why it exists: a read-only scale audit measured what one cycle, one policy reload and one plan
cost scaleahead at 1,000 and 10,000 workloads, with throwaway scripts against the Kubernetes API
emulator; this module is that audit as a product benchmark, so the numbers in docs/benchmarks.md
("Control plane") can be made again.

Per size N, against the emulator (``scaleahead.bench.kubeemu``, kmock) run in its **own process**
(its CPU is not counted here; it is stopped at the end, also on Ctrl-C or an error), holding N
Deployments ``w{i}``, N PredictiveScalingPolicy objects (one per Deployment, direct mode) and N
HPAs on other workloads in ``namespaces`` namespaces, each namespace with a ResourceQuota and a
LimitRange, through the official ``kubernetes`` client:

- ``policy_load``: ``ClusterPolicies.load`` with the cluster-wide HPA check and ``PolicyLimits``;
- ``policy_reload_unchanged``: ``Daemon._reload_policies``' "did the policies change?" test on two
  loads of the same objects (equal, distinct ``Policy`` values), as every reload with nothing changed;
- ``PolicyStatusWriter.publish``: ``status_first`` (a new writer, every status new: at most
  ``PolicyStatusWriter.MAX_WRITES`` PATCHes, the rest deferred); then the rest is written once
  without requests (a stand-in client, not measured: N PATCHes to the emulator take minutes at
  10,000), so that ``status_steady`` (the same statuses a second later: nothing to write) and
  ``status_all_changed`` (every desired replica count changed: at most ``MAX_WRITES`` PATCHes, the
  rest deferred) start from a writer that has written every status;
- ``read_state``: ``KubernetesTarget.read_state`` of the N Deployments (quotas on);
- ``apply_plan``: ``Actuator.apply_plan`` of a plan scaling every workload up by one, journaled in
  a SQLite file (or a PostgreSQL schema: ``db_url``, below), with the kill switch and the Lease as
  ``scaleahead run`` has them: how many actions were applied and how many skipped, by reason (e.g.
  the plan got older than ``max_plan_age_s``);
- ``journal``: the same plan against a target that answers at once (no API): the journal's and
  the safety layer's share, per action;
- ``reconcile``: ``Actuator.reconcile`` (no budget) of N journal rows left ``planned``.

The stores of ``apply_plan`` and ``reconcile`` (one), ``journal`` and ``outcomes`` are SQLite files
in a temporary folder, or, given a PostgreSQL ``db_url`` (``--db-url``), fresh schemas of that
database (``scaleahead_bench_<pid><random>_<n>_<store>_<size>``, each store's connections on it by their
``search_path``), dropped at the end: production's database, with its network round trips and
concurrent commits.

Each is run ``repeat`` times; per run: CPU of this process (``time.process_time``), wall time,
HTTP requests the client sent (counted at ``kubernetes.client.rest.RESTClientObject.request``, by
method and resource) and the process's peak RSS so far (``ru_maxrss``: it only grows, so it is the
peak of everything measured up to then). The emulator answers a request in several ms, slower than a
real API server: the wall time of the API-bound sections is an upper bound; CPU and requests are
the portable figures.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import secrets
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

from scaleahead.errors import UserError

#: Every section of a size's result, in the order they run.
SECTIONS = (
    "policy_load",
    "policy_reload_unchanged",
    "status_first",
    "status_steady",
    "status_all_changed",
    "read_state",
    "apply_plan",
    "journal",
    "outcomes",
    "reconcile",
)

#: How long the emulator may take to start and fill itself (10,000 workloads take seconds).
START_TIMEOUT_S = 300.0

#: The PostgreSQL connect option the bench sets for each store's schema (``--db-url`` must not).
_SEARCH_PATH = "options"

INSTALL_HINT = "Install the development extra: pip install -e '.[dev]' (or: pip install kmock)."


def require_emulator() -> None:
    """A ``UserError`` unless the emulator's ``kmock`` package can be imported (``dev`` extra only)."""
    try:
        import kmock  # noqa: F401
    except ImportError as exc:
        raise UserError(
            "scaleahead bench control-plane needs the Kubernetes API emulator, which uses the kmock "
            "package; kmock is not installed (it is in the dev extra only).",
            INSTALL_HINT,
        ) from exc


# -- counting requests ------------------------------------------------------------------------
def request_label(method: str, url: str) -> str:
    """``"GET deployments/scale"``, ``"GET resourcequotas (list)"``, ``"PATCH predictivescalingpolicies/status"``."""
    path = url.split("//", 1)[-1].split("/", 1)[-1].split("?", 1)[0].strip("/")
    parts = path.split("/")
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) > 2:
        parts = parts[2:]
    if not parts or not parts[0]:
        return f"{method} (other)"
    if len(parts) == 1:
        return f"{method} {parts[0]} (list)"
    return f"{method} {parts[0]}/{parts[2]}" if len(parts) > 2 else f"{method} {parts[0]}"


class RequestCounter:
    """Counts the official client's HTTP requests by ``request_label`` while installed."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._orig: Any = None

    def __enter__(self) -> RequestCounter:
        from kubernetes.client import rest

        orig: Any = rest.RESTClientObject.request
        counts = self.counts
        lock = threading.Lock()  # the actuator's concurrent writes count from several threads

        def counted(client: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            label = request_label(method, url)
            with lock:
                counts[label] += 1
            return orig(client, method, url, *args, **kwargs)

        self._orig = orig
        setattr(rest.RESTClientObject, "request", counted)  # noqa: B010 - a method replaced while counting
        return self

    def __exit__(self, *exc: object) -> None:
        from kubernetes.client import rest

        setattr(rest.RESTClientObject, "request", self._orig)  # noqa: B010


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _measure(
    counter: RequestCounter,
    repeat: int,
    run: Callable[[], dict[str, Any] | None],
    before: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``run`` ``repeat`` times (``before`` each time, not measured): every run's numbers, the
    medians, and the last run's requests and extra numbers (what ``run`` returns)."""
    runs = []
    for _ in range(repeat):
        if before is not None:
            before()
        counter.counts.clear()
        c0, w0 = time.process_time(), time.perf_counter()
        extra = run() or {}
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        runs.append(
            {
                "cpu_s": round(cpu, 4),
                "wall_s": round(wall, 4),
                "requests": sum(counter.counts.values()),
                "by_request": dict(sorted(counter.counts.items())),
                "peak_rss_mb": _peak_rss_mb(),
                **extra,
            }
        )
    last = runs[-1]
    return {
        **{k: v for k, v in last.items() if k not in ("cpu_s", "wall_s")},
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 4),
        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 4),
        "runs": runs,
    }


# -- the emulator in its own process ----------------------------------------------------------
@contextmanager
def emulator(workloads: int, namespaces: int, latency_s: float = 0.0) -> Iterator[tuple[str, int]]:
    """A populated emulator (``python -m scaleahead.bench.kubeemu``) in a child process: yields its
    URL and pid; it is stopped (and waited for) on the way out, whatever happened. The child also
    stops by itself when this process goes (its stdin closes)."""
    spec = {"workloads": workloads, "namespaces": namespaces, "quotas": True, "latency_s": latency_s}
    with _child(
        "scaleahead.bench.kubeemu", spec, "the Kubernetes API emulator", INSTALL_HINT + " Or try a smaller --sizes."
    ) as (
        ready,
        pid,
    ):
        yield str(ready["url"]), pid


@contextmanager
def _child(module: str, spec: dict[str, Any], what: str, hint: str) -> Iterator[tuple[dict[str, Any], int]]:
    """``python -m module SPEC`` in a child process that prints one JSON line when ready: yields
    that line and the pid; the child is stopped (and waited for) on the way out, whatever
    happened, and stops by itself when this process goes (its stdin closes)."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    # its messages go to a file, not a pipe: a pipe nobody reads would stop it once full
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", module, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
            line = proc.stdout.readline() if ready else b""
            if not line:
                _stop(proc)
                err.seek(0)
                tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
                raise UserError(
                    f"{what} did not start within {START_TIMEOUT_S:.0f} s "
                    f"(exit code {proc.poll()}): {' | '.join(tail) or 'no message'}",
                    hint,
                )
            yield json.loads(line), proc.pid
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


# -- the sections -----------------------------------------------------------------------------
class _InstantTarget:
    """A cluster that answers at once and keeps each workload's replicas (the journal's share)."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def read_state(self, workloads: Sequence[Any]) -> Any:  # pragma: no cover - not called by apply_plan
        raise NotImplementedError

    def live(self, action: Any, quota_room: bool = True) -> Any:
        from actuator.base import LiveObject

        value = self.values.get(action.target, 2)
        return LiveObject(action.target, "spec.replicas", value, str(value), {})

    def write(self, action: Any, value: int, live: Any) -> Any:
        from actuator.base import LiveObject

        self.values[action.target] = value
        return LiveObject(live.target, live.field, value, str(value), {})


class _NoWrites:
    """A ``CustomObjectsApi`` stand-in whose status writes succeed without a request."""

    def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}


class _EventCatcher(logging.Handler):
    def __init__(self, event: str) -> None:
        super().__init__()
        self.event, self.seen = event, 0

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == self.event:
            self.seen += 1


def _skip_reason(detail: str, cause: str) -> str:
    if "older than maxPlanAge" in detail:
        return "plan_too_old"
    return cause or (detail.split(":", 1)[0][:60] if detail else "unknown")


def _outcomes(results: Sequence[Any], actuator: Any) -> dict[str, Any]:
    by_outcome = Counter(r.outcome for r in results)
    skipped = Counter(_skip_reason(r.detail, r.cause) for r in results if r.outcome == "skipped")
    return {
        "actions": len(results),
        "applied": by_outcome.get("applied", 0),
        "skipped": by_outcome.get("skipped", 0),
        "failed": sum(v for k, v in by_outcome.items() if k not in ("applied", "skipped")),
        "outcomes": dict(sorted(by_outcome.items())),
        "skipped_by_reason": dict(sorted(skipped.items())),
        "journal_transactions": int(actuator.journal_transactions),
    }


def bench_size(
    url: str,
    workloads: int,
    repeat: int,
    max_plan_age_s: float,
    workdir: Path,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    concurrent_writes: int = 1,
    databases: Databases | None = None,
) -> dict[str, Any]:
    """Every section for one size against the emulator at ``url``; the result per section (the
    stores in ``databases``: SQLite files in ``workdir`` when None)."""
    from kubernetes import client as k8s

    from actuator.applying import Actuator
    from actuator.autoscalers import AutoscalerCheck
    from actuator.kubernetes import CLIENT_POOL_SIZE, KubernetesTarget
    from actuator.leader import LeaderElector
    from actuator.policy_resources import ClusterPolicies, PolicyLimits, PolicyStatusWriter
    from actuator.safety import SafetyConfig
    from scaleahead.daemon import Daemon, PolicyStatus
    from scaleahead.types import Plan, Reason, ScaleTo
    from storage import Store

    cfg = k8s.Configuration()
    cfg.host = url.rstrip("/")
    cfg.retries = 0
    cfg.connection_pool_maxsize = CLIENT_POOL_SIZE  # as make_api_client: room for the concurrent writes
    api: Any = k8s.ApiClient(cfg)
    out: dict[str, Any] = {}
    dbs = databases if databases is not None else Databases(workdir)

    def done(name: str, result: dict[str, Any]) -> None:
        out[name] = result
        if progress is not None:
            progress(name, result)

    # the stores are closed also when a section fails (an open connection would hold up the drop
    # of its PostgreSQL schema)
    with RequestCounter() as counter, ExitStack() as opened:
        # 1. policies: the load, then the reload's change test with nothing changed
        policies_api = ClusterPolicies(
            api,
            None,
            autoscalers=AutoscalerCheck(api, cluster_wide=True),
            limits=PolicyLimits(capacity={"*": 10**9}),
        )
        loaded: list[Any] = []

        def load() -> dict[str, Any]:
            loaded[:] = policies_api.load()
            return {"accepted": len(loaded), "rejected": len(policies_api.rejected)}

        done("policy_load", _measure(counter, repeat, load))
        policies = list(loaded)
        again = policies_api.load()  # equal values, distinct objects: as the daemon's next reload
        catcher = _EventCatcher("policies_reloaded")
        daemon_log = logging.getLogger("scaleahead.daemon")
        saved = (logging.root.manager.disable, daemon_log.level, daemon_log.propagate)
        # the change test says "policies changed" at INFO: caught here, printed nowhere
        logging.disable(logging.NOTSET)
        daemon_log.setLevel(logging.INFO)
        daemon_log.propagate = False
        daemon_log.addHandler(catcher)
        stand_in = types.SimpleNamespace(
            policy_source=lambda: again,
            deps=types.SimpleNamespace(policies=policies),
            set_policies=lambda _p: None,
        )
        try:

            def reload() -> dict[str, Any]:
                seen = catcher.seen
                Daemon._reload_policies(stand_in)  # type: ignore[arg-type]
                return {"policies": len(again), "changed": catcher.seen > seen}

            done("policy_reload_unchanged", _measure(counter, repeat, reload))
        finally:
            daemon_log.removeHandler(catcher)
            logging.disable(saved[0])
            daemon_log.setLevel(saved[1])
            daemon_log.propagate = saved[2]

        # 2. status publish
        writer = PolicyStatusWriter(api, refresh_s=60.0)
        clock = [1_000_000.0]
        desired = [3]

        def statuses() -> list[Any]:
            return [
                PolicyStatus(
                    p.metadata.name,
                    p.metadata.namespace or p.workload.namespace,
                    p.workload.key,
                    desired[0],
                    2,
                    12.5,
                    "none",
                    "forecast",
                    "forecast_up",
                    clock[0],
                    "seasonal_naive",
                )
                for p in policies
            ]

        def publish() -> dict[str, Any]:
            before = writer.writes
            writer.publish(statuses(), now=clock[0])
            return {"patches": writer.writes - before, "deferred": writer.deferred, "cap": writer.max_writes}

        done("status_first", _measure(counter, 1, publish))
        # the rest written once too, as by the publishes of the following cycles, but without
        # requests (a stand-in client): N PATCHes to the emulator would take minutes at 10,000
        client, cap = writer.custom, writer.max_writes
        writer.custom, writer.max_writes = cast(Any, _NoWrites()), max(len(policies), 1)
        try:
            writer.publish(statuses(), now=clock[0])
        finally:
            writer.custom, writer.max_writes = client, cap

        def tick() -> None:
            clock[0] += 1.0  # well within refresh_s: nothing is due a refresh

        done("status_steady", _measure(counter, repeat, publish, before=tick))

        def change() -> None:
            tick()
            desired[0] += 1

        done("status_all_changed", _measure(counter, repeat, publish, before=change))

        # 3. read_state
        refs = [p.workload for p in policies]
        target = KubernetesTarget(api, policies, timeout_s=10.0, quotas=True)

        def read() -> dict[str, Any]:
            state = target.read_state(refs)
            return {"workloads_read": len(state.workloads)}

        done("read_state", _measure(counter, repeat, read))

        # 4. apply_plan, journaled in SQLite, with the kill switch and the Lease
        store = Store(dbs.url(f"apply_{workloads}"))
        opened.callback(store.close)
        store.upgrade()
        elector = LeaderElector(api, "scaleahead-system", "bench", lease_duration_s=15, timeout_s=10.0)
        elector.is_leader(time.time())
        actuator = Actuator(
            target,
            store,
            policies,
            SafetyConfig(max_plan_age_s=max_plan_age_s, concurrent_writes=concurrent_writes),
            kill_switch=lambda: target.kill_switch("scaleahead-system", "scaleahead-kill-switch"),
            is_leader=lambda _t: elector.holds(time.time(), 10.0),
            clock=time.time,
        )
        replicas = [2]

        def scale_up(cur: int) -> Any:
            reason = Reason("forecast_up", "bench: one replica more")
            return Plan(time.time(), tuple(ScaleTo(r, cur, cur + 1, reason) for r in refs))

        def apply() -> dict[str, Any]:
            plan = scale_up(replicas[0])
            _, ids = store.record_plan(plan, source="actuator")
            results = actuator.apply_plan(plan, plan.created_at, action_ids=ids)
            replicas[0] += 1
            return _outcomes(results, actuator)

        done("apply_plan", _measure(counter, repeat, apply))

        # 5. the journal alone: the same plans against a target that answers at once
        jstore = Store(dbs.url(f"journal_{workloads}"))
        opened.callback(jstore.close)
        jstore.upgrade()
        jact = Actuator(cast(Any, _InstantTarget()), jstore, (), SafetyConfig(max_plan_age_s=1e9), clock=time.time)
        jreplicas = [2]

        def journal() -> dict[str, Any]:
            plan = scale_up(jreplicas[0])
            _, ids = jstore.record_plan(plan, source="actuator")
            results = jact.apply_plan(plan, plan.created_at, action_ids=ids)
            jreplicas[0] += 1
            return _outcomes(results, jact)

        result = _measure(counter, repeat, journal)
        result["median_cpu_ms_per_action"] = round(1000 * result["median_cpu_s"] / max(workloads, 1), 4)
        result["median_wall_ms_per_action"] = round(1000 * result["median_wall_s"] / max(workloads, 1), 4)
        done("journal", result)

        # 6. the leader's measured outcomes (scaleahead.outcomes): one cycle's scoring of every
        # service (a day of real demand each, the state as read above), one bucket's write to
        # SQLite, and an hour's window summed as `rollout evaluate --measured` reads it
        from scaleahead.outcomes import BUCKET_S, OutcomeBook
        from scaleahead.traces import load_series
        from scaleahead.types import ClusterState, WorkloadState

        nasa = load_series("nasa-10s")
        day = nasa.between(nasa.start, nasa.start + 86400.0)
        history = {r: day for r in refs}
        now = day.end
        state = ClusterState({r: WorkloadState(r, 3, 3) for r in refs})
        book = OutcomeBook()
        ostore = Store(dbs.url(f"outcomes_{workloads}"))
        opened.callback(ostore.close)
        ostore.upgrade()
        flushed = [0]

        def score() -> dict[str, Any]:
            return {"scored": book.step(policies, state, history, now, 10.0, {})}

        def write() -> dict[str, Any]:
            rows = book.take(math.inf)
            for row in rows:  # each write another bucket, as the loop writes one per 5 minutes
                row["bucket"] += flushed[0] * BUCKET_S
            flushed[0] += 1
            return {"rows": ostore.record_outcomes(rows)}

        def window() -> dict[str, Any]:
            return {"workloads": len(ostore.outcome_sums(-math.inf, rollout_id=0))}

        def one_cycle() -> None:
            book.step(policies, state, history, now, 10.0, {})

        def an_hour() -> None:
            for _ in range(11):  # with the one written each time: twelve buckets, a canary's window
                one_cycle()
                write()

        done(
            "outcomes",
            {
                "step": _measure(counter, repeat, score),
                "write": _measure(counter, repeat, write, before=one_cycle),
                "window": _measure(counter, repeat, window, before=an_hour),
            },
        )
        ostore.close()

        # 7. reconcile N rows left planned (as after a crash between journal and API call)
        def leave_planned() -> None:
            store.record_plan(scale_up(replicas[0]), source="actuator")

        def reconcile() -> dict[str, Any]:
            rows = actuator.reconcile(time.time())
            return {"rows": len(rows), "states": dict(sorted(Counter(state for _, state, _ in rows).items()))}

        done("reconcile", _measure(counter, repeat, reconcile, before=leave_planned))
        store.close()
        jstore.close()
    api.close()
    return out


def bench_control_plane(
    sizes: Sequence[int],
    repeat: int = 1,
    namespaces: int = 100,
    max_plan_age_s: float = 30.0,
    progress: Callable[[int, str, dict[str, Any]], None] | None = None,
    concurrent_writes: int = 1,
    api_latency_s: float = 0.0,
    db_url: str | None = None,
    db_rtt_s: float = 0.0,
) -> dict[str, Any]:
    """Every section per size, each size against a fresh emulator process; the result object.
    The stores are SQLite files, or fresh schemas of the PostgreSQL database ``db_url`` (reached
    through a proxy that adds the round trip ``db_rtt_s``, when above 0)."""
    require_emulator()
    result: dict[str, Any] = {
        "params": {
            "sizes": list(sizes),
            "repeat": repeat,
            "namespaces": namespaces,
            "max_plan_age_s": max_plan_age_s,
            "concurrent_writes": concurrent_writes,
            "api_latency_s": api_latency_s,
            "status_max_writes": _status_cap(),
            "database": "sqlite",
            "db_latency_ms": db_rtt_s * 1000.0,
            "db_round_trip_ms": {},
        },
        "sizes": {},
        "emulator_pids": [],
    }
    logging.disable(logging.WARNING)  # thousands of per-action lines would measure the log, not the work
    try:
        with (
            tempfile.TemporaryDirectory(prefix="scaleahead-bench-cp-") as tmp,
            Databases(Path(tmp), db_url, db_rtt_s) as dbs,
        ):
            result["params"]["database"] = dbs.describe()
            result["params"]["db_round_trip_ms"] = dbs.round_trip_ms
            for n in sizes:
                w0 = time.perf_counter()
                with emulator(n, namespaces, api_latency_s) as (url, pid):
                    result["emulator_pids"].append(pid)
                    started = round(time.perf_counter() - w0, 2)

                    def show(name: str, section: dict[str, Any], n: int = n) -> None:
                        if progress is not None:
                            progress(n, name, section)

                    sections = bench_size(url, n, repeat, max_plan_age_s, Path(tmp), show, concurrent_writes, dbs)
                result["sizes"][str(n)] = {"emulator_start_s": started, **sections}
    finally:
        logging.disable(logging.NOTSET)
    return result


def _status_cap() -> int:
    from actuator.policy_resources import PolicyStatusWriter

    return PolicyStatusWriter.MAX_WRITES


class Databases:
    """Where the bench's stores live: SQLite files in ``workdir`` (``db_url`` None), or fresh
    schemas of the PostgreSQL database ``db_url``, one per store, dropped on ``close``.

    Bad input is refused before any work (``check``): a URL that is not PostgreSQL's, one that sets
    the connect option ``options`` itself (the bench sets ``search_path`` there), a server that
    cannot be reached or a user that may not create a schema; each says what to do.

    With ``rtt_s`` above 0 the stores reach the server through a proxy in a child process
    (``scaleahead.bench.netdelay``) that holds every chunk of bytes ``rtt_s / 2`` each way: a server
    on another machine. The round trip it gives is measured (``round_trip_ms``): its threads add a
    few tenths of a millisecond to what is asked. Schemas are made and dropped directly.
    """

    def __init__(self, workdir: Path, db_url: str | None = None, rtt_s: float = 0.0) -> None:
        self.workdir = workdir
        self.db_url = db_url
        self.rtt_s = rtt_s
        self.schemas: list[str] = []
        self.round_trip_ms: dict[str, float] = {}
        self._run = f"{os.getpid()}{secrets.token_hex(3)}"
        self._engine: Any = None
        self._proxy: tuple[str, int] | None = None
        self._children = ExitStack()
        if db_url is not None:
            self._engine = self._connect(db_url)
            try:
                if rtt_s > 0:
                    self._start_proxy(db_url)
                self.round_trip_ms = self._round_trips()
            except BaseException:
                self.close()
                raise

    @staticmethod
    def check(db_url: str, rtt_s: float = 0.0) -> None:
        """Refuse a ``--db-url`` (with ``--db-latency-ms``: ``rtt_s``) the bench cannot use
        (``UserError``); touches no server."""
        from sqlalchemy.engine import make_url

        from storage.store import _hide_password

        shown = _hide_password(db_url)
        try:
            parsed = make_url(db_url)
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy says what is wrong with the URL
            raise UserError(f"--db-url {shown!r} is not a database URL: {exc}.", _URL_HINT) from exc
        if parsed.get_backend_name() != "postgresql":
            raise UserError(
                f"--db-url {shown!r} is not a PostgreSQL URL.",
                "Leave --db-url out for SQLite (the default: files in a temporary folder); " + _URL_HINT,
            )
        if _SEARCH_PATH in parsed.query:
            raise UserError(
                f"--db-url {shown!r} sets the connect option {_SEARCH_PATH!r}.",
                "Leave it out: the bench sets each store's schema there (search_path).",
            )
        if rtt_s > 0 and (not parsed.host or "host" in parsed.query or parsed.host.startswith("/")):
            raise UserError(
                f"--db-latency-ms needs a server reached over TCP, and --db-url {shown!r} names none (or a socket).",
                "Give the server's host and port in the URL (postgresql+psycopg://USER@HOST:PORT/DB).",
            )

    def _connect(self, db_url: str) -> Any:
        from sqlalchemy import create_engine, text
        from sqlalchemy.exc import SQLAlchemyError

        from storage.store import _connect_args, _hide_password

        self.check(db_url)
        try:
            engine = create_engine(db_url, future=True, connect_args=_connect_args(db_url))
            with engine.connect() as conn:
                self.version = str(conn.execute(text("SHOW server_version")).scalar())
        except (SQLAlchemyError, ImportError) as exc:
            cause = getattr(exc, "orig", None) or exc
            raise UserError(
                f"Cannot reach the database {_hide_password(db_url)}: {_hide_password(str(cause), db_url)}.",
                "Check that the server is running and the URL (host, port, user, database) is right.",
            ) from exc
        self._engine = engine
        try:
            self._new_schema("probe", keep=False)  # may this user create schemas? Asked before any work.
        except UserError:
            engine.dispose()
            raise
        return engine

    def _new_schema(self, store: str, keep: bool = True) -> str:
        """Create the store's schema (in a transaction rolled back unless ``keep``); a
        ``UserError`` if this user may not."""
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        from storage.store import _hide_password

        # a run's own token (a pid alone repeats: PID 1 in containers, a run killed before its
        # drop) and a count (one store name twice: --sizes 3,3)
        schema = f"scaleahead_bench_{self._run}_{len(self.schemas) + 1}_{store}"
        try:
            with self._engine.connect() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
                (conn.commit if keep else conn.rollback)()
        except SQLAlchemyError as exc:
            if getattr(getattr(exc, "orig", None), "sqlstate", None) == "42P06":  # duplicate_schema
                raise UserError(
                    f"The schema {schema} already exists in {_hide_password(str(self.db_url))}.",
                    f'Drop it if no bench is running (DROP SCHEMA "{schema}" CASCADE) and run again.',
                ) from exc
            raise UserError(
                f"Cannot create the schema {schema} in {_hide_password(str(self.db_url))}: "
                f"{getattr(exc, 'orig', None) or exc}.",
                "Give a database in which this user may create schemas (e.g. one it owns), or leave "
                "--db-url out for SQLite.",
            ) from exc
        return schema

    def _start_proxy(self, db_url: str) -> None:
        from sqlalchemy.engine import make_url

        parsed = make_url(db_url)
        spec = {"host": parsed.host, "port": parsed.port or 5432, "rtt_s": self.rtt_s}
        ready, _ = self._children.enter_context(
            _child("scaleahead.bench.netdelay", spec, "the database delay proxy", "Run again without --db-latency-ms.")
        )
        self._proxy = ("127.0.0.1", int(ready["port"]))

    def _round_trips(self, pings: int = 30) -> dict[str, float]:
        """The median time of ``SELECT 1`` on one connection, direct and (with a delay) through the
        proxy, in ms (after one to warm up)."""
        from sqlalchemy import create_engine, text

        from storage.store import _connect_args

        out: dict[str, float] = {}
        for name, url in (("direct", str(self.db_url)), ("stores", self._store_url(None))):
            if name == "stores" and self._proxy is None:
                out[name] = out["direct"]
                continue
            engine = create_engine(url, future=True, connect_args=_connect_args(url))
            try:
                with engine.connect() as conn:
                    times = []
                    for _ in range(pings + 1):
                        t0 = time.perf_counter()
                        conn.execute(text("SELECT 1")).scalar()
                        times.append(time.perf_counter() - t0)
                out[name] = round(statistics.median(times[1:]) * 1000.0, 3)
            finally:
                engine.dispose()
        return out

    def describe(self) -> str:
        """``sqlite``, or ``postgresql <server version>`` (with the stores' measured round trip)."""
        if self._engine is None:
            return "sqlite"
        trips = self.round_trip_ms
        if self._proxy is None:
            return f"postgresql {self.version}, round trip {trips.get('direct', 0):.2f} ms"
        return (
            f"postgresql {self.version}, round trip {trips.get('stores', 0):.2f} ms through a proxy adding "
            f"{self.rtt_s * 1000:g} ms ({trips.get('direct', 0):.2f} ms direct)"
        )

    def url(self, store: str) -> str:
        """A URL to an empty database for the store named ``store`` (a SQLite file, or a new schema)."""
        if self._engine is None:
            return f"sqlite:///{self.workdir / f'{store}.db'}"
        schema = self._new_schema(store)
        self.schemas.append(schema)
        return self._store_url(schema)

    def _store_url(self, schema: str | None) -> str:
        """``db_url`` with ``schema`` first on the search path, through the proxy if there is one."""
        from sqlalchemy.engine import make_url

        url = make_url(str(self.db_url))
        if schema is not None:
            url = url.update_query_dict({_SEARCH_PATH: f"-csearch_path={schema}"})
        if self._proxy is not None:
            url = url.set(host=self._proxy[0], port=self._proxy[1])
        return url.render_as_string(hide_password=False)

    def close(self) -> None:
        """Stop the proxy; drop the schemas made (waiting at most 10 s for a lock); one that cannot
        be dropped is named on stderr, to drop by hand."""
        self._children.close()
        self._proxy = None
        if self._engine is None:
            return
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        for schema in self.schemas:
            try:
                with self._engine.begin() as conn:
                    conn.execute(text("SET LOCAL lock_timeout = '10s'"))
                    conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            except SQLAlchemyError as exc:
                print(
                    f"could not drop the bench's schema {schema} ({getattr(exc, 'orig', None) or exc}): "
                    f'drop it by hand: DROP SCHEMA "{schema}" CASCADE',
                    file=sys.stderr,
                )
        self.schemas.clear()
        self._engine.dispose()

    def __enter__(self) -> Databases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_URL_HINT = "give postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"
