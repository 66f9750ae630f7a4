"""The daemon as ``scaleahead run`` wires it for high availability (the journaled actuator, the Lease
election on the Kubernetes API emulator, ``_reconciler`` as ``on_lead``), on a virtual clock, with a
real PostgreSQL server that is stopped (``pg_ctl stop -m immediate``) and started again, or a
shared SQLite file: found by the HA audit of 2026-12-06."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "actuator"))

from kubeemu import DEPLOYMENTS, LEASES, deployment  # noqa: E402
from kubeemu import kube as kube  # noqa: E402 - the fixture, used by name

from forecaster import make_model  # noqa: E402
from scaleahead.clock import VirtualClock  # noqa: E402
from scaleahead.commands.run import _reconciler, cluster_actuation  # noqa: E402
from scaleahead.daemon import Daemon  # noqa: E402
from scaleahead.loop import Deps  # noqa: E402
from scaleahead.settings import Settings  # noqa: E402
from scaleahead.tracesource import TraceHistory  # noqa: E402
from scaleahead.types import Series  # noqa: E402
from storage import Store  # noqa: E402
from tests.daemon.conftest import DAY, make_policies  # noqa: E402


@pytest.fixture
def pg(postgres_server: Any) -> Iterator[tuple[Any, str]]:
    """The session's PostgreSQL server and the URL of a fresh database on it (with a password in
    the URL: trust authentication ignores it, the logs must not show it). The server is running
    again after the test, whatever the test did to it."""
    name = f"ha{int(time.time() * 1e6) % 10**12}"
    admin = postgres_server.url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = f"postgresql+psycopg://postgres:hunter2secret@127.0.0.1:{postgres_server.port}/{name}"
    try:
        yield postgres_server, url
    finally:
        if not postgres_server.running():
            postgres_server.start()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _replica(
    kube: Any,
    nasa: Series,
    db_url: str,
    identity: str,
    clock: VirtualClock,
    settings: Settings | None = None,
    **kw: Any,
) -> tuple[Daemon, Store, Any]:
    """One replica as ``scaleahead run`` builds it."""
    settings = settings or Settings()
    settings.forecast.model = "seasonal_naive"
    settings.actuation.namespace = "scaleahead-system"
    pols = make_policies(2)
    history = TraceHistory(default=nasa, window_s=1.2 * DAY, scale_spread=0.5)
    training = TraceHistory(default=nasa, window_s=3 * DAY, scale_spread=0.5)
    model = make_model("seasonal_naive").fit([nasa.between(nasa.start, clock.now())])
    store = Store(db_url)
    target, actuator, leader = cluster_actuation(kube.api_client(), store, pols, settings, clock, identity)
    deps = Deps(history, model, target, store, pols, actuator=actuator)
    daemon = Daemon(
        deps,
        settings,
        clock,
        leadership=leader,
        training_history=training,
        on_lead=_reconciler(actuator, None, settings.actuation.reconcile_retry_s),
        **kw,
    )
    return daemon, store, actuator


def _deployments(kube: Any) -> None:
    for i in range(2):
        kube.cluster.put(DEPLOYMENTS, "shop", f"web{i}", deployment(2))


def _replicas(kube: Any, name: str) -> int:
    return int(kube.cluster.get(DEPLOYMENTS, "shop", name)["spec"]["replicas"])


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """What the daemon logs (INFO and up), with each record's ``event``."""
    handler = _Records()
    logger = logging.getLogger("scaleahead")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)


def test_a_plan_the_database_failed_in_the_middle_of_is_reconciled_while_the_same_replica_leads(
    kube: Any, nasa: Series, pg: tuple[Any, str], records: list[logging.LogRecord]
) -> None:
    """PostgreSQL stops just after the leader's first scale write of a two-action plan landed (web0
    2 -> 12), before its journal row is marked; it is back two ticks later and the same replica goes
    on leading. Until 2026-12-06 both rows stayed 'planned' (and ``scaleahead_actions_unresolved``
    at 0) until some replica next started to lead."""
    server, url = pg
    _deployments(kube)
    clock = VirtualClock(nasa.start + 3 * DAY)
    daemon, store, actuator = _replica(kube, nasa, url, "pod-a", clock)
    real, writes = actuator.target.write, []

    def write(action: Any, value: int, live: Any) -> Any:
        out = real(action, value, live)
        writes.append((action.target, value))
        if len(writes) == 1:
            server.stop()  # immediate: as if the server crashed or the network dropped
        return out

    actuator.target.write = write
    reg = daemon.metrics.registry
    try:
        daemon.run(lambda: False, max_ticks=2)  # the plan fails after its first write; then the database is down
        assert writes == [("Deployment/shop/web0", 12)]
        assert reg.get_sample_value("scaleahead_cycles_total", {"result": "error"}) == 2
        # the two rows the failed plan could not settle count as unresolved meanwhile
        assert reg.get_sample_value("scaleahead_actions_unresolved") == 2
    finally:
        server.start()
    daemon.run(lambda: False, max_ticks=3)  # the same replica leads on
    assert reg.get_sample_value("scaleahead_leader") == 1
    rows = {r.target: r for r in store.actions() if r.id <= 2}
    assert [r for r in store.actions() if r.state == "planned"] == []
    assert rows["Deployment/shop/web0"].state == "applied", rows
    assert "shows the change (spec.replicas=12)" in rows["Deployment/shop/web0"].outcome
    assert rows["Deployment/shop/web1"].state == "skipped", rows
    assert reg.get_sample_value("scaleahead_actions_unresolved") == 0
    assert writes.count(("Deployment/shop/web0", 12)) == 1  # the landed write was not made again
    daemon.shutdown()


def test_an_unreachable_database_fails_the_cycle_with_one_line_that_says_what_to_do(
    kube: Any, nasa: Series, pg: tuple[Any, str], records: list[logging.LogRecord]
) -> None:
    """Until 2026-12-06 the cycle logged 'cycle failed; backing off 10 s' with the psycopg and
    SQLAlchemy traceback, and no hint."""
    server, url = pg
    _deployments(kube)
    clock = VirtualClock(nasa.start + 3 * DAY)
    daemon, store, _ = _replica(kube, nasa, url, "pod-a", clock)
    daemon.run(lambda: False, max_ticks=1)
    clock.sleep(settings_interval := daemon.settings.loop.interval_s)
    records.clear()
    server.stop()
    try:
        daemon.run(lambda: False, max_ticks=3)
    finally:
        server.start()
    failed = [r for r in records if getattr(r, "event", "") == "cycle_failed"]
    assert failed, [r.getMessage() for r in records]
    for r in failed:
        msg = r.getMessage()
        assert r.levelno == logging.ERROR and r.exc_info is None, msg
        assert "Cannot reach or write the database postgresql+psycopg://postgres:***@127.0.0.1:" in msg, msg
        assert "Check that the server is running" in msg and "backing off" in msg, msg
        assert "hunter2secret" not in msg
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records if r.exc_info]
    assert "Cannot reach or write the database" in daemon.health.readiness()[1]
    clock.sleep(settings_interval)
    daemon.run(lambda: False, max_ticks=2)  # the server is back: cycles succeed again
    assert daemon.metrics.registry.get_sample_value("scaleahead_cycles_total", {"result": "ok"}) >= 2
    daemon.shutdown()


def test_another_error_still_logs_its_traceback(daemon_factory: Any, records: list[logging.LogRecord]) -> None:
    daemon, clock, target, store = daemon_factory(n=1)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    store.record_forecasts = broken  # type: ignore[method-assign]
    daemon.run(lambda: False, max_ticks=1)
    (failed,) = [r for r in records if getattr(r, "event", "") == "cycle_failed"]
    assert failed.exc_info is not None and "Cannot reach" not in failed.getMessage()


def _holder(kube: Any) -> str:
    return str(kube.cluster.get(LEASES, "scaleahead-system", "scaleahead-leader")["spec"].get("holderIdentity") or "")


def _gated_training(daemon: Daemon) -> tuple[threading.Event, threading.Event]:
    """Hold the retraining's history read (a long fit) until the returned gate is set."""
    gate, started = threading.Event(), threading.Event()
    read = daemon.training_history.read

    def slow_read(pols: Any, now: float) -> Any:
        started.set()
        assert gate.wait(30.0)
        return read(pols, now)

    daemon.training_history.read = slow_read  # type: ignore[method-assign]
    return gate, started


def test_a_retraining_that_ends_after_the_lease_was_lost_registers_nothing(
    kube: Any, nasa: Series, tmp_path: Path, records: list[logging.LogRecord]
) -> None:
    """pod-a starts the scheduled retraining on its job thread, then pod-b takes the Lease. Until
    2026-12-06 pod-a's job, finishing as a standby, still registered a model version and opened a
    rollout in the shared database."""
    _deployments(kube)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    clock = VirtualClock(nasa.start + 3 * DAY)
    every_minute = Settings()
    every_minute.jobs.retrain_cron = "* * * * *"
    a, store, _ = _replica(kube, nasa, url, "pod-a", clock, every_minute, background_jobs=True)
    gate, started = _gated_training(a)
    assert "retrain" in a.tick(clock.now()).jobs  # due at once: the clock is on a minute
    assert started.wait(30.0)
    clock.sleep(40.0)  # pod-a's ticks stall: pod-b takes over
    b, _, _ = _replica(kube, nasa, url, "pod-b", clock)
    assert b.tick(clock.now()).role == "leader" and _holder(kube) == "pod-b"
    assert a.tick(clock.now()).role == "standby"
    gate.set()
    future = a.jobs.jobs["retrain"].future
    assert future is not None
    future.result(timeout=60.0)
    assert not a.retrained
    assert store.models() == [] and store.rollouts() == []
    dropped = [r.getMessage() for r in records if getattr(r, "event", "") == "retrain_skipped"]
    assert any("no longer holds the leader Lease" in m and "dropped" in m for m in dropped), dropped
    a.shutdown()
    b.shutdown()


def test_shutdown_waits_for_the_running_job_before_it_releases_the_lease(
    kube: Any, nasa: Series, tmp_path: Path
) -> None:
    """Until 2026-12-06 shutdown released the Lease first, then waited for a running retraining,
    which registered its model while the successor led. Now the job ends first while the Lease is
    held (its model is registered), then the Lease is released."""
    _deployments(kube)
    clock = VirtualClock(nasa.start + 3 * DAY)
    settings = Settings()
    settings.jobs.retrain_cron = "* * * * *"
    a, store, _ = _replica(kube, nasa, f"sqlite:///{tmp_path / 'a.db'}", "pod-a", clock, settings, background_jobs=True)
    gate, started = _gated_training(a)
    assert "retrain" in a.tick(clock.now()).jobs  # due at once: the clock is on a minute
    assert started.wait(30.0)
    holders: list[str] = []
    stopping = threading.Thread(target=lambda: holders.append(str(a.shutdown(job_wait_s=30.0))))
    stopping.start()
    deadline = time.monotonic() + 30.0
    while not getattr(a._executor, "_shutdown", False) and time.monotonic() < deadline:
        time.sleep(0.01)  # until shutdown is waiting for the job (it stopped the executor first)
    time.sleep(0.05)
    holders.append(_holder(kube))  # still pod-a's while its job runs
    gate.set()
    stopping.join(60.0)
    assert holders == ["pod-a", "True"]
    assert _holder(kube) == ""  # released once the job ended
    assert len(a.retrained) == 1 and len(store.models()) == 1


def test_a_job_still_running_when_the_lease_ran_out_during_shutdown_registers_nothing(
    kube: Any, nasa: Series, tmp_path: Path
) -> None:
    """The ticks stop at shutdown, so the Lease is not renewed while shutdown waits for a job: a
    retraining that ends after the Lease ran out (a follower may lead by then) drops its model."""
    _deployments(kube)
    clock = VirtualClock(nasa.start + 3 * DAY)
    settings = Settings()
    settings.jobs.retrain_cron = "* * * * *"
    a, store, _ = _replica(kube, nasa, f"sqlite:///{tmp_path / 'a.db'}", "pod-a", clock, settings, background_jobs=True)
    gate, started = _gated_training(a)
    assert "retrain" in a.tick(clock.now()).jobs  # due at once: the clock is on a minute
    assert started.wait(30.0)
    done: list[bool] = []
    stopping = threading.Thread(target=lambda: done.append(a.shutdown(job_wait_s=30.0)))
    stopping.start()
    clock.sleep(settings.actuation.lease_duration_s + 1.0)  # the Lease (15 s) runs out during the wait
    gate.set()
    stopping.join(60.0)
    assert done == [True]
    assert not a.retrained and store.models() == [] and store.rollouts() == []
