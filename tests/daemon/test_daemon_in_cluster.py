"""The daemon end to end on a virtual clock: a real Prometheus (backfilled with promtool from the
NASA trace), the Kubernetes API emulator (kmock) through the official client with the journaled
actuator and Lease leader election, and SQLite."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "actuator"))

from kubeemu import DEPLOYMENTS, LEASES, deployment  # noqa: E402
from kubeemu import kube as kube  # noqa: E402 - the fixture, used by name

from actuator.applying import Actuator  # noqa: E402
from actuator.kubernetes import KubernetesTarget  # noqa: E402
from actuator.leader import LeaderElector  # noqa: E402
from forecaster import make_model  # noqa: E402
from scaleahead.clock import VirtualClock  # noqa: E402
from scaleahead.commands.run import _LeaseLeadership, cluster_actuation  # noqa: E402
from scaleahead.daemon import Daemon  # noqa: E402
from scaleahead.loop import Deps  # noqa: E402
from scaleahead.policy import Policy, parse_policies  # noqa: E402
from scaleahead.prometheus.backfill import LocalPrometheus, create_blocks, write_openmetrics  # noqa: E402
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig  # noqa: E402
from scaleahead.prometheus.history import PrometheusHistory  # noqa: E402
from scaleahead.settings import Settings  # noqa: E402
from scaleahead.traces import load_series  # noqa: E402
from scaleahead.types import MovePod, Plan, Reason, ScaleTo, Series  # noqa: E402
from storage import Store  # noqa: E402
from tests.conftest import write_kubeconfig  # noqa: E402

DAY = 86400.0
SPAN = int(1.5 * DAY / 10)  # 1.5 days at 10 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    """Two workloads of real NASA demand (the second shifted by 6 hours), 1.5 days, in a real Prometheus."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.fail("Debian's prometheus package is not installed: run `make test`, which installs it.")
    s = load_series("nasa-10s")
    i0 = int(np.flatnonzero(np.isfinite(s.values))[0]) + 8640  # day 2 of the trace: no outage
    series = []
    for k, shift in enumerate((0, 2160)):
        vals = s.values[i0 + shift : i0 + shift + SPAN].copy()
        series.append(({"workload": f"web{k}"}, Series(f"web{k}", s.start + i0 * 10.0, 10.0, vals)))
    base = tmp_path_factory.mktemp("prom-daemon")
    om = base / "demand.om"
    with om.open("w") as out:
        write_openmetrics(out, "demand", series)
    create_blocks(om, base / "tsdb", "24h")
    server = LocalPrometheus(base / "tsdb", _free_port(), lookback_s=5.0).start()
    try:
        yield server.url, s.start + i0 * 10.0
    finally:
        server.stop()


def _policies() -> list:  # type: ignore[type-arg]
    docs = [
        f"""apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: web{k}, namespace: shop}}
spec:
  target: {{name: web{k}}}
  demand: {{query: 'demand{{workload="web{k}"}}', unit: req/10s}}
  capacityPerReplica: 2
  maxReplicas: 60
  maxStepUp: 20
"""
        for k in range(2)
    ]
    return parse_policies("---\n".join(docs))


def test_the_daemon_runs_many_cycles_against_prometheus_and_the_kubernetes_api(prometheus, kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url, start = prometheus
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'daemon.db'}")
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=1.2 * DAY)
    t0 = start + 1.2 * DAY
    clock = VirtualClock(t0)
    api = kube.api_client()
    model = make_model("seasonal_naive").fit(list(history.read(pols, t0).values()))
    settings = Settings()
    settings.forecast.model = "seasonal_naive"  # the retraining mechanism, not an LSTM fit
    settings.jobs.retrain_cron = "*/20 * * * *"
    settings.actuation.namespace = "scaleahead-system"
    target, actuator, leader = cluster_actuation(api, store, pols, settings, clock, "pod-a")  # as `scaleahead run`
    deps = Deps(history, model, target, store, pols, actuator=actuator)
    daemon = Daemon(deps, settings, clock, leadership=leader, reference_error=100.0)

    ticks = daemon.run(lambda: False, max_ticks=120)  # 20 minutes of 10 s cycles
    assert ticks == 120
    reg = daemon.metrics.registry
    assert reg.get_sample_value("scaleahead_cycles_total", {"result": "ok"}) == 120
    assert reg.get_sample_value("scaleahead_leader") == 1
    # History came from Prometheus, strictly before each tick, for both workloads.
    assert set(daemon.history.last) == {p.workload for p in pols}
    assert all(s.end <= clock.now() for s in daemon.history.last.values())
    assert history.errors == {}
    # Decisions reached the cluster through the journaled actuator.
    applied = store.actions(state="applied")
    assert applied, "some scale actions were applied"
    for p in pols:
        live = kube.cluster.get(DEPLOYMENTS, "shop", p.spec.target.name)["spec"]["replicas"]
        assert live == reg.get_sample_value("scaleahead_planned_replicas", {"workload": p.workload.key})
    # This replica holds the Lease; the scheduled retraining registered a challenger, not production.
    lease = kube.cluster.get(LEASES, "scaleahead-system", "scaleahead-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == "pod-a"
    assert daemon.retrained and store.model(daemon.retrained[0].model_version_id).status == "challenger"
    assert store.rollouts(state="running")
    daemon.shutdown()


def test_an_action_the_leader_could_not_reconcile_is_settled_once_the_api_server_answers(  # type: ignore[no-untyped-def]
    prometheus, kube, tmp_path
) -> None:
    """A crash left an action planned after its write landed; when the new leader starts, the API
    server answers its read with 500s, so the action stays planned (unresolved). The leader looks
    at it again every actuation.reconcile_retry_s, and settles it once the read succeeds, without a
    restart."""
    from kubeemu import Fault

    from scaleahead.commands.run import _reconciler

    url, start = prometheus
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'unresolved.db'}")
    api = kube.api_client()
    t0 = start + 1.2 * DAY
    web0 = pols[0].workload
    crashed = Plan(t0 - 30.0, (ScaleTo(web0, 2, 7, Reason("test", "before the crash", {})),), {}, ())
    (aid,) = store.record_plan(crashed, source="loop", state="planned")[1]
    before_crash = Actuator(KubernetesTarget(api, pols), store, pols)
    assert before_crash._apply_one(crashed.actions[0], t0 - 30.0, t0 - 30.0, False).outcome == "applied"
    assert kube.cluster.get(DEPLOYMENTS, "shop", "web0")["spec"]["replicas"] == 7

    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=1.2 * DAY)
    clock = VirtualClock(t0)
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    settings.actuation.namespace = "scaleahead-system"
    settings.actuation.reconcile_retry_s = 60.0
    target, actuator, leader = cluster_actuation(api, store, pols, settings, clock, "pod-a")
    model = make_model("seasonal_naive").fit(list(history.read(pols, t0).values()))
    deps = Deps(history, model, target, store, pols, actuator=actuator)
    daemon = Daemon(
        deps,
        settings,
        clock,
        leadership=leader,
        on_lead=_reconciler(actuator, None, settings.actuation.reconcile_retry_s),
    )
    reg = daemon.metrics.registry
    kube.cluster.faults.append(Fault("GET", "/deployments/web0/scale", status=500, times=10_000))
    daemon.run(lambda: False, max_ticks=3)  # 30 s: started to lead, the read failed
    assert [a.id for a in store.actions(state="planned")] == [aid]
    assert reg.get_sample_value("scaleahead_actions_unresolved") == 1
    daemon.run(lambda: False, max_ticks=6)  # another minute: retried, the server still answers 500
    assert [a.id for a in store.actions(state="planned")] == [aid]
    kube.cluster.faults.clear()  # the API server answers again
    daemon.run(lambda: False, max_ticks=7)
    assert store.actions(state="planned") == []
    (row,) = [a for a in store.actions() if a.id == aid]
    assert row.state == "applied" and "shows the change (spec.replicas=7)" in row.outcome, row
    assert reg.get_sample_value("scaleahead_actions_unresolved") == 0
    daemon.shutdown()


def test_a_workload_whose_deployment_cannot_be_read_backs_off_at_stage_state_and_the_other_is_scaled(  # type: ignore[no-untyped-def]
    prometheus, kube, tmp_path, caplog
) -> None:
    """The API server answers GET of web0's Deployment with 500. web0 is not planned from an
    invented state (until 2026-12-05 it was held "at 1: stale history" while it ran 2, with no
    error): it is reported at stage ``state``, backed off like a history or forecast error, with
    nothing journaled for it; web1 is planned and scaled. Once the API server answers, web0 is
    planned and scaled again."""
    import logging

    from kubeemu import Fault

    url, start = prometheus
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    store = Store(f"sqlite:///{tmp_path / 'unread.db'}")
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=1.2 * DAY)
    t0 = start + 1.2 * DAY
    clock = VirtualClock(t0)
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    settings.actuation.namespace = "scaleahead-system"
    target, actuator, leader = cluster_actuation(kube.api_client(), store, pols, settings, clock, "pod-a")
    model = make_model("seasonal_naive").fit(list(history.read(pols, t0).values()))
    daemon = Daemon(Deps(history, model, target, store, pols, actuator=actuator), settings, clock, leadership=leader)
    reg = daemon.metrics.registry
    web0, web1 = (p.workload.key for p in pols)
    kube.cluster.faults.append(Fault("GET", "/deployments/web0", status=500, times=10_000))
    caplog.set_level(logging.WARNING)
    report = daemon.tick(clock.now()).report
    assert report is not None
    assert report.errors.get(web0, "").startswith("state:") and "500" in report.errors[web0], report.errors
    assert [a.target for a in report.plan.actions] == [web1], report.plan.actions
    assert [(r.action.target, r.outcome) for r in report.results] == [(web1, "applied")], report.results
    assert {a.target for a in store.actions()} == {web1}
    assert kube.cluster.get(DEPLOYMENTS, "shop", "web0")["spec"]["replicas"] == 2
    assert kube.cluster.get(DEPLOYMENTS, "shop", "web1")["spec"]["replicas"] > 2
    assert reg.get_sample_value("scaleahead_workload_errors_total", {"workload": web0, "stage": "state"}) == 1
    assert (reg.get_sample_value("scaleahead_workload_backoff_seconds", {"workload": web0}) or 0) > 0
    assert not reg.get_sample_value("scaleahead_workload_backoff_seconds", {"workload": web1})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and web0 in r.getMessage()]
    assert any("500" in m for m in warned) and any("state" in m and "backing off" in m for m in warned), warned
    kube.cluster.faults.clear()  # the API server answers again: after the back-off web0 is planned
    clock.sleep(settings.loop.interval_s * 2)
    report = daemon.tick(clock.now()).report
    assert report is not None and web0 not in report.errors, report.errors
    assert {a.target for a in report.plan.actions} == {web0, web1}
    assert kube.cluster.get(DEPLOYMENTS, "shop", "web0")["spec"]["replicas"] > 2
    assert reg.get_sample_value("scaleahead_workload_backoff_seconds", {"workload": web0}) == 0
    daemon.shutdown()


def test_a_standby_replica_never_writes_to_the_cluster(prometheus, kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url, start = prometheus
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    api = kube.api_client()
    t0 = start + 1.2 * DAY
    clock = VirtualClock(t0)
    holder = LeaderElector(api, "scaleahead-system", "pod-a", lease_duration_s=15, monotonic=clock.monotonic)
    assert holder.is_leader(t0)
    store = Store(f"sqlite:///{tmp_path / 'standby.db'}")
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=1.2 * DAY)
    target = KubernetesTarget(api, pols)
    deps = Deps(history, make_model("naive"), target, store, pols, actuator=Actuator(target, store, pols))
    standby = _LeaseLeadership(
        LeaderElector(api, "scaleahead-system", "pod-b", lease_duration_s=15, monotonic=clock.monotonic)
    )
    daemon = Daemon(deps, Settings(), clock, leadership=standby)
    before = len(kube.cluster.writes())
    for _ in range(3):  # pod-a keeps renewing; pod-b stays standby
        assert holder.is_leader(clock.now())
        daemon.tick(clock.now())
        clock.sleep(5.0)
    writes = [w for w in kube.cluster.writes()[before:] if "leases" not in w[1]]
    assert writes == [], "a standby replica made no write call"
    assert store.count_plans() == 0
    assert daemon.metrics.registry.get_sample_value("scaleahead_leader") == 0


def test_a_leader_whose_lease_was_taken_during_a_cycle_writes_nothing(kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A cycle that outlasts the Lease (a slow history read): another replica takes over meanwhile.
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    api = kube.api_client()
    settings = Settings()
    settings.actuation.namespace = "scaleahead-system"
    t0 = 1_700_000_000.0
    clock = VirtualClock(t0)
    target, actuator, leader = cluster_actuation(api, None, pols, settings, clock, "pod-a")
    assert leader.is_leader(t0)  # the tick's check
    other = LeaderElector(api, "scaleahead-system", "pod-b", lease_duration_s=15, monotonic=clock.monotonic)
    assert not other.is_leader(t0)  # pod-b sees pod-a's lease
    clock.sleep(20.0)  # the cycle took 20 s: longer than the 15 s lease
    assert other.is_leader(clock.now())
    before = len(kube.cluster.writes())
    plan = Plan(t0, tuple(ScaleTo(p.workload, 2, 5, Reason("test", "test", {})) for p in pols), {}, ())
    results = actuator.apply_plan(plan, t0)
    assert [r.outcome for r in results] == ["skipped"] * len(pols)
    assert all("lease" in r.detail or "leader" in r.detail for r in results), [r.detail for r in results]
    assert [w for w in kube.cluster.writes()[before:] if "leases" not in w[1]] == []
    assert all(kube.cluster.get(DEPLOYMENTS, "shop", p.spec.target.name)["spec"]["replicas"] == 2 for p in pols)


def _rebalancing_daemon(prometheus, kube, tmp_path):  # type: ignore[no-untyped-def]
    """A leader with ``loop.max_moves`` 4 on a fragmented cluster (n3 holds one pod that fits
    elsewhere), 30 s before a rebalance period; its fences' wall clock is the virtual one."""
    sys.path.insert(0, str(REPO / "tests" / "actuator"))
    from test_k8s_placement import fragmented

    url, start = prometheus
    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    fragmented(kube)
    store = Store(f"sqlite:///{tmp_path / 'moves.db'}")
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=1.2 * DAY)
    t0 = start + 1.2 * DAY
    clock = VirtualClock(t0 - t0 % 300 + 300 - 30)  # 30 s before a rebalance period starts
    model = make_model("seasonal_naive").fit(list(history.read(pols, clock.now()).values()))
    settings = Settings()
    settings.actuation.namespace = "scaleahead-system"
    settings.loop.max_moves = 4
    # the fences' wall clock is the virtual one here, so that their time passes with the ticks
    target, actuator, leader = cluster_actuation(
        kube.api_client(), store, pols, settings, clock, "pod-a", wall=clock.now
    )
    daemon = Daemon(Deps(history, model, target, store, pols, actuator=actuator), settings, clock, leadership=leader)
    return daemon, clock, store, actuator, settings


def _fenced(kube, node: str = "n3") -> bool:  # type: ignore[no-untyped-def]
    from kubeemu import NODES

    taints = (kube.cluster.get(NODES, None, node) or {}).get("spec", {}).get("taints") or []
    return any(t.get("key") == "scaleahead.io/draining" for t in taints)


def test_with_max_moves_the_daemon_rebalances_once_per_rebalance_interval(prometheus, kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kubeemu import PODS

    daemon, clock, store, actuator, settings = _rebalancing_daemon(prometheus, kube, tmp_path)
    moves_per_tick = []
    for _ in range(40):  # 400 s: the cycles of one period boundary
        result = daemon.tick(clock.now())
        assert result.report is not None
        moves_per_tick.append(sum(isinstance(a, MovePod) for a in result.report.plan.actions))
        clock.sleep(10.0)
    assert moves_per_tick[3] > 0 and sum(1 for m in moves_per_tick if m) == 1, moves_per_tick
    assert kube.cluster.get(PODS, "shop", "cart-1") is None, "evicted: its ReplicaSet re-creates it elsewhere"
    assert {a.kind for a in store.actions(state="applied")} >= {"MovePod"}
    # the drained node was fenced before the eviction (actuation.drain_fence_s, default 900 s) ...
    assert _fenced(kube) and actuator.drain_fence_s == settings.actuation.drain_fence_s == 900
    writes = kube.cluster.writes()
    assert writes.index(("PATCH", "/api/v1/nodes/n3")) < writes.index(
        ("POST", "/api/v1/namespaces/shop/pods/cart-1/eviction")
    )
    # ... and the leader lifts the fence at its first plan after that time (fenced at the 4th tick,
    # 30 s in; the clock is 400 s in now)
    clock.sleep(900.0 - 370.0 - 20.0)
    daemon.tick(clock.now())
    assert _fenced(kube), "not before its time"
    clock.sleep(30.0)
    daemon.tick(clock.now())
    assert not _fenced(kube)


def test_a_fence_is_lifted_in_time_while_the_cycles_fail_but_not_while_paused(prometheus, kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Until 2026-12-07 only a plan's writes lifted a fence: a node stayed unschedulable for as
    long as the cycles failed (here the database is gone). The kill switch still stops every write."""
    from sqlalchemy.exc import OperationalError

    daemon, clock, store, actuator, settings = _rebalancing_daemon(prometheus, kube, tmp_path)
    for _ in range(6):  # the drain at the 4th tick fences n3 until 900 s later
        daemon.tick(clock.now())
        clock.sleep(10.0)
    assert _fenced(kube)

    def exported() -> dict[str, float]:  # scaleahead_drain_fence_until_seconds
        (metric,) = [m for m in daemon.metrics.registry.collect() if m.name == "scaleahead_drain_fence_until_seconds"]
        return {s.labels["node"]: s.value for s in metric.samples}

    fenced_at = clock.now() - 30.0  # the 4th tick
    assert exported() == {"n3": pytest.approx(fenced_at + 900.0)}

    def gone(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("INSERT", {}, Exception("the database is gone"))

    store.record_forecasts = gone  # type: ignore[method-assign]
    clock.sleep(900.0)
    settings.actuation.paused = True  # the kill switch: nothing is written, this lift neither
    with pytest.raises(OperationalError):
        daemon.tick(clock.now())
    assert _fenced(kube)
    settings.actuation.paused = False
    settings.actuation.dry_run = True  # a dry run writes nothing
    with pytest.raises(OperationalError):
        daemon.tick(clock.now())
    assert _fenced(kube)
    settings.actuation.dry_run = False
    from kubeemu import CONFIGMAPS

    kube.cluster.put(CONFIGMAPS, "scaleahead-system", "scaleahead-kill-switch", {"data": {"paused": "true"}})
    with pytest.raises(OperationalError):
        daemon.tick(clock.now())
    assert _fenced(kube), "the kill switch's ConfigMap"
    assert exported() == {"n3": pytest.approx(fenced_at + 900.0)}, "overdue: what the alert sees"
    kube.cluster.put(CONFIGMAPS, "scaleahead-system", "scaleahead-kill-switch", {"data": {"paused": "false"}})
    clock.sleep(10.0)
    with pytest.raises(OperationalError):
        daemon.tick(clock.now())
    assert not _fenced(kube), "lifted at its time although the cycle failed"
    assert exported() == {}


def test_the_run_command_target_reads_namespace_pod_quotas_unless_turned_off(kube) -> None:  # type: ignore[no-untyped-def]
    from kubeemu import QUOTAS

    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    quota = {"status": {"hard": {"pods": "20"}, "used": {"pods": str(2 * len(pols) + 3)}}}
    kube.cluster.put(QUOTAS, "shop", "pods", quota)
    settings = Settings()
    clock = VirtualClock(1_700_000_000.0)
    refs = [p.workload for p in pols]
    target, act, _ = cluster_actuation(kube.api_client(), None, pols, settings, clock, "pod-a")
    assert target.read_state(refs).pod_quotas == {"shop": 20 - 3}  # what the other 3 pods leave
    assert act.drain_fence_s == 0, "rebalancing off (loop.max_moves 0): no drain fences"
    assert act.lift_fences, "an earlier run's fences are still lifted"
    assert act.fence_clock is time.time, "fences are real objects: their times are the wall clock's"
    settings.loop.max_moves = 4
    _, act, _ = cluster_actuation(kube.api_client(), None, pols, settings, clock, "pod-a", fences=False)
    assert act.drain_fence_s == 0 and not act.lift_fences, "run --once or --ticks: no fences"
    settings.loop.max_moves = 0
    settings.loop.namespace_quotas = False
    target, _, _ = cluster_actuation(kube.api_client(), None, pols, settings, clock, "pod-a")
    assert target.read_state(refs).pod_quotas == {}


def test_run_with_a_shard_elects_on_its_own_lease(kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`run --shard i/N --target kubernetes` through the console entry point: each shard has its
    own Lease (a shared lease name would let one shard act and silence the others)."""
    import os
    import subprocess

    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    docs = []
    for p in pols:
        name = p.spec.target.name
        docs.append(
            "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\n"
            f"metadata: {{name: {name}, namespace: shop}}\n"
            f"spec:\n  target: {{name: {name}}}\n  demand: {{query: 'x'}}\n  capacityPerReplica: 2\n"
        )
    (tmp_path / "policies.yaml").write_text("\n---\n".join(docs))
    write_kubeconfig(tmp_path / "kubeconfig", kube.url)
    env = {k: v for k, v in os.environ.items() if k != "POD_NAME"}
    env |= {"PYTHONPATH": str(REPO), "SCALEAHEAD_FORECAST__MODEL": "naive", "SCALEAHEAD_ACTUATION__NAMESPACE": "shop"}
    env["SCALEAHEAD_LOOP__MAX_MOVES"] = "4"  # rebalancing on
    reads_nodes = {}
    for index in (0, 1):
        before = len(kube.cluster.calls())
        out = subprocess.run(
            [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(tmp_path / "policies.yaml"),
             "--history", "trace:nasa-10s", "--target", "kubernetes", "--kubeconfig", str(tmp_path / "kubeconfig"),
             "--db", f"sqlite:///{tmp_path / f'shard{index}.db'}", "--once", "--virtual", "--shard", f"{index}/2"],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        lease = kube.cluster.get(LEASES, "shop", f"scaleahead-leader-shard-{index}-of-2")
        assert lease is not None, "the shard's own Lease"
        assert lease["spec"]["holderIdentity"] == "", "held for the cycle, released on exit"
        assert lease["spec"]["acquireTime"]
        reads_nodes[index] = any(path.endswith("/nodes") for _, path in kube.cluster.calls()[before:])
        assert ("rebalance_on_shard_0" in out.stderr) == (index == 1)
    assert kube.cluster.get(LEASES, "shop", "scaleahead-leader") is None
    # Nodes and pods are the whole cluster's: only shard 0 reads them and plans moves.
    assert reads_nodes == {0: True, 1: False}


def test_run_with_ticks_rebalances_but_sets_no_fence_it_would_not_stay_to_lift(kube, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`run --ticks N` ends after N cycles: a fence it set would stay until someone lifts it by hand,
    so it drains without one (docs/rebalance.md, "Drain fences"), as `--once` does."""
    import os
    import subprocess

    from kubeemu import PODS
    from test_k8s_placement import fragmented

    pols = _policies()
    for p in pols:
        kube.cluster.put(DEPLOYMENTS, "shop", p.spec.target.name, deployment(2))
    fragmented(kube)  # n3 holds one pod that fits elsewhere
    docs = [
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\n"
        f"metadata: {{name: {p.spec.target.name}, namespace: shop}}\n"
        f"spec:\n  target: {{name: {p.spec.target.name}}}\n  demand: {{query: 'x'}}\n  capacityPerReplica: 2\n"
        for p in pols
    ]
    (tmp_path / "policies.yaml").write_text("\n---\n".join(docs))
    write_kubeconfig(tmp_path / "kubeconfig", kube.url)
    env = {k: v for k, v in os.environ.items() if k != "POD_NAME"}
    env |= {"PYTHONPATH": str(REPO), "SCALEAHEAD_FORECAST__MODEL": "naive", "SCALEAHEAD_ACTUATION__NAMESPACE": "shop"}
    env["SCALEAHEAD_LOOP__MAX_MOVES"] = "4"  # rebalancing on, fences at their default 900 s
    out = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "run", "--policies", str(tmp_path / "policies.yaml"),
         "--history", "trace:nasa-10s", "--target", "kubernetes", "--kubeconfig", str(tmp_path / "kubeconfig"),
         "--db", f"sqlite:///{tmp_path / 'ticks.db'}", "--virtual", "--no-server", "--ticks", "32"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    writes = kube.cluster.writes()
    assert ("POST", "/api/v1/namespaces/shop/pods/cart-1/eviction") in writes, "drained within a rebalance period"
    assert kube.cluster.get(PODS, "shop", "cart-1") is None
    assert not [w for w in writes if w[1].startswith("/api/v1/nodes")], "no fence set, none to lift"


def test_two_processes_on_one_host_are_two_candidates(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from scaleahead.commands.run import replica_identity

    monkeypatch.delenv("POD_NAME", raising=False)
    one, two = replica_identity(), replica_identity()
    assert one != two and one.startswith(socket.gethostname() + "_")
    monkeypatch.setenv("POD_NAME", "scaleahead-7d9f-abcde")
    assert replica_identity() == "scaleahead-7d9f-abcde"


def _policy(name: str, query: str) -> Policy:
    return parse_policies(
        f"""apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: {name}, namespace: shop}}
spec:
  target: {{name: {name}}}
  demand: {{query: '{query}', unit: req/10s}}
  capacityPerReplica: 2
  maxReplicas: 60
"""
    )[0]


def _files(folder: Path) -> set[str]:
    return {f.name for f in folder.iterdir()} if folder.exists() else set()


def test_policy_churn_does_not_grow_the_daemons_history_in_memory_or_on_disk(prometheus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Until 2026-12-05 the history of every removed workload stayed in the loop's history and its
    cache folder (and in the training cache) for ever: with workloads replaced over time, memory and
    `--artifacts` grew without bound (soak audit finding 1). Now a policy change drops the history
    of the queries no policy uses any more, and a retraining that of its own cache; a workload
    backing off (left out of the reads) keeps its history."""
    from scaleahead.tracesource import InMemoryTarget

    url, start = prometheus
    t0 = start + 1.2 * DAY
    clock = VirtualClock(t0)
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=0.5 * DAY, cache_dir=tmp_path / "hc")
    training = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=DAY, cache_dir=tmp_path / "tc")
    stable = _policy("web0", 'demand{workload="web0"}')
    store = Store(f"sqlite:///{tmp_path / 'churn.db'}")
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    model = make_model("seasonal_naive").fit(list(history.read([stable], t0).values()))
    deps = Deps(history, model, InMemoryTarget(), store, [stable])
    daemon = Daemon(deps, settings, clock, training_history=training)
    for epoch in range(6):  # a workload replaced every 3 cycles, each with its own query
        churned = _policy(f"churn{epoch}", f'demand{{workload="web1"}} * {epoch + 1}')
        daemon.set_policies([stable, churned])
        for _ in range(3):
            assert daemon.tick(clock.now()).role == "leader"
            clock.sleep(10.0)
        live = {history._key(p.spec.demand.query, 10.0) for p in (stable, churned)}
        assert set(history._entries) == live, f"epoch {epoch}: only the policies' history is held"
        assert _files(tmp_path / "hc") == {f"{k}.{ext}" for k in live for ext in ("json", "f64")}
    # A workload backing off is left out of the reads, but keeps its history across a policy change.
    for _ in range(5):
        daemon.backoff.failed(churned.workload.key, clock.now())  # backing off for minutes
    backing_off = history._key(churned.spec.demand.query, 10.0)
    daemon.set_policies([stable, churned, _policy("other", 'demand{workload="web1"} * 100')])
    for _ in range(2):
        daemon.tick(clock.now())
        clock.sleep(10.0)
        assert churned.workload not in daemon.history.last and backing_off in history._entries
    daemon.set_policies([stable, churned])
    assert backing_off in history._entries and len(history._entries) == 2 and len(_files(tmp_path / "hc")) == 4
    daemon.tick(clock.now())
    assert churned.workload not in daemon.history.last and backing_off in history._entries
    # The training cache keeps only the policies of the last retraining.
    daemon._retrain(clock.now(), "schedule")
    daemon.set_policies([stable])
    daemon._retrain(clock.now(), "schedule")
    assert training._entries == {}  # released after each retraining, as before
    assert _files(tmp_path / "tc") == {f"{training._key(stable.spec.demand.query, 10.0)}.{e}" for e in ("json", "f64")}
    daemon.shutdown()


def test_the_prune_job_deletes_the_history_cache_files_of_workloads_removed_while_it_was_down(  # type: ignore[no-untyped-def]
    prometheus, tmp_path
) -> None:
    """Files of a workload whose policy went while no daemon ran are not named by any policy change:
    the `prune` job deletes the history cache files not written for longer than their window."""
    import os
    import time

    from scaleahead.tracesource import InMemoryTarget

    url, start = prometheus
    t0 = start + 1.2 * DAY
    web0, web1 = _policy("web0", 'demand{workload="web0"}'), _policy("web1", 'demand{workload="web1"}')
    for folder in ("hc", "tc"):  # the process before the restart held both
        PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=DAY, cache_dir=tmp_path / folder).read(
            [web0, web1], t0
        )
    old = time.time() - DAY - 60
    for f in [*(tmp_path / "hc").iterdir(), *(tmp_path / "tc").iterdir()]:
        os.utime(f, (old, old))  # the daemon was down for longer than the window
    history = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=DAY, cache_dir=tmp_path / "hc")
    training = PrometheusHistory(PrometheusClient(PrometheusConfig(url)), window_s=DAY, cache_dir=tmp_path / "tc")
    settings = Settings()
    settings.forecast.model = "seasonal_naive"
    deps = Deps(history, make_model("naive"), InMemoryTarget(), Store(f"sqlite:///{tmp_path / 'p.db'}"), [web0])
    daemon = Daemon(deps, settings, VirtualClock(t0 + 600), training_history=training)
    daemon.tick(t0 + 600)  # web1 was removed while the daemon was down: no policy change names it
    assert len(_files(tmp_path / "hc")) == 4
    out = daemon.prune(t0 + 600)
    assert out["history_cache_files"] == 6  # web1's in both folders, and web0's training files (a day old)
    key0 = history._key(web0.spec.demand.query, 10.0)
    assert _files(tmp_path / "hc") == {f"{key0}.json", f"{key0}.f64"}  # web0's, held by the loop, stays
    assert _files(tmp_path / "tc") == set()
    daemon.shutdown()
