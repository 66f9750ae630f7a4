"""The policy status tells whether the plan's change happened: the daemon on a virtual clock, the
Kubernetes API emulator (kmock) through the official client, with the journaled actuator, Lease
election and the status writer of ``scaleahead run``, a real NASA trace slice and SQLite.

Until 2026-12-06 the status was built from the plan's reason only: with a GitOps tool undoing every
write it said ``lastReasonCode: forecast``, "scale shop/web0 3 -> 8", while nothing was written."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kmock
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "actuator"))

from kubeemu import CONFIGMAPS, DEPLOYMENTS, HPAS, Fault, deployment  # noqa: E402
from kubeemu import kube as kube  # noqa: E402 - the fixture, used by name
from test_other_writers import owned_by  # noqa: E402

from actuator.policy_resources import GROUP, PLURAL, VERSION, PolicyStatusWriter  # noqa: E402
from forecaster import make_model  # noqa: E402
from scaleahead.clock import VirtualClock  # noqa: E402
from scaleahead.commands.run import cluster_actuation  # noqa: E402
from scaleahead.daemon import NOT_APPLIED, Daemon  # noqa: E402
from scaleahead.loop import Deps  # noqa: E402
from scaleahead.policy import parse_policies  # noqa: E402
from scaleahead.settings import Settings  # noqa: E402
from scaleahead.tracesource import TraceHistory  # noqa: E402
from scaleahead.types import Series  # noqa: E402
from storage import Store  # noqa: E402
from tests.daemon.conftest import DAY  # noqa: E402

POLICIES = kmock.resource(GROUP, VERSION, PLURAL)
#: One policy whose plan is its ceiling every cycle (the trace's demand needs more than 8 replicas),
#: so the only thing that changes from cycle to cycle is whether the change is applied.
POLICY = """apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {name: web0, namespace: shop}
spec:
  target: {name: web0}
  demand: {query: 'sum(rate(http_requests_total{deployment="web0"}[1m]))', unit: req/10s}
  capacityPerReplica: 2
  maxReplicas: 8
"""
STATUS_PATH = f"/{PLURAL}/web0/status"


class Run:
    def __init__(self, kube: Any, daemon: Daemon, clock: VirtualClock) -> None:
        self.kube, self.daemon, self.clock = kube, daemon, clock

    def status(self) -> dict[str, Any]:
        obj = self.kube.cluster.get(POLICIES, "shop", "web0")
        return dict(obj.get("status") or {})

    def status_writes(self) -> int:
        return sum(1 for m, p in self.kube.cluster.calls() if m == "PATCH" and p.endswith(STATUS_PATH))

    def replicas(self) -> int:
        return int(self.kube.cluster.get(DEPLOYMENTS, "shop", "web0")["spec"]["replicas"])

    def tick(self) -> dict[str, Any]:
        """One cycle, then the clock moves on by the loop's interval; the status after the cycle."""
        self.daemon.tick(self.clock.now())
        self.clock.sleep(self.daemon.settings.loop.interval_s)
        return self.status()


@pytest.fixture
def run(kube, nasa: Series, tmp_path) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    def build(policy: str = POLICY, **actuation: Any) -> Run:
        pols = parse_policies(policy)
        kube.cluster.resources[POLICIES] = kmock.ResourceInfo(namespaced=True, subresources=["status"])
        kube.cluster.put(POLICIES, "shop", "web0", {"apiVersion": f"{GROUP}/{VERSION}", "spec": {}})
        kube.cluster.put(DEPLOYMENTS, "shop", "web0", deployment(3))
        t0 = nasa.start + 3 * DAY
        clock = VirtualClock(t0)
        store = Store(f"sqlite:///{tmp_path / 'status.db'}")
        stores.append(store)
        settings = Settings()
        settings.forecast.model = "seasonal_naive"
        settings.actuation.namespace = "scaleahead-system"
        for key, value in actuation.items():
            setattr(settings.actuation, key, value)
        api = kube.api_client()
        target, actuator, leader = cluster_actuation(api, store, pols, settings, clock, "pod-a")  # as `scaleahead run`
        history = TraceHistory(default=nasa, window_s=1.2 * DAY, scale_spread=0.0)
        model = make_model("seasonal_naive").fit([nasa.between(nasa.start, t0)])
        daemon = Daemon(
            Deps(history, model, target, store, pols, actuator=actuator),
            settings,
            clock,
            leadership=leader,
            status_sink=PolicyStatusWriter(api, refresh_s=60.0),
        )
        daemons.append(daemon)
        return Run(kube, daemon, clock)

    stores: list[Store] = []
    daemons: list[Daemon] = []
    yield build
    for d in daemons:
        d.shutdown()
    for s in stores:
        s.close()


def test_a_gitops_tool_undoing_each_write_shows_in_the_status_held_by_it_and_until_when(run) -> None:  # type: ignore[no-untyped-def]
    r = run(human_edit_hold_s=60.0)  # interval 10 s: a hold is six cycles

    def argo_self_heal() -> None:
        if r.replicas() != 3:
            r.kube.cluster.edit(
                DEPLOYMENTS,
                "shop",
                "web0",
                {"spec": {"replicas": 3}, "metadata": owned_by("argocd-controller", "f:spec", "f:replicas")},
            )

    first = r.tick()  # scaleahead writes 8
    assert r.replicas() == 8
    assert first["desiredReplicas"] == 8 and first["currentReplicas"] == 3
    assert first["lastReasonCode"] not in NOT_APPLIED and first["lastReason"].startswith("scale"), first
    planned_code = first["lastReasonCode"]

    argo_self_heal()
    held = r.tick()  # the edit is seen: held for the hold
    assert r.replicas() == 3
    # Desired stays the plan's wish, Current what runs; the reason says why they differ
    assert (held["desiredReplicas"], held["currentReplicas"]) == (8, 3), held
    assert held["lastReasonCode"] == "human_edit", held
    why = held["lastReason"]
    assert why.startswith("not applied: human edit: Deployment/shop/web0 spec.replicas was set to 3"), why
    assert "by argocd-controller (scaleahead had set 8)" in why and "respected until " in why, why
    assert "; planned: scale " in why, why

    writes = r.status_writes()
    for _ in range(5):  # still held, the same decision: not written every cycle (refreshed each minute)
        argo_self_heal()
        assert r.tick()["lastReasonCode"] == "human_edit"
    assert r.status_writes() == writes, "a steady hold is not written every cycle"

    argo_self_heal()
    again = r.tick()  # the hold is over: written again, and the status says so at once
    assert r.replicas() == 8
    assert again["lastReasonCode"] == planned_code and again["lastReason"].startswith("scale"), again
    assert r.status_writes() == writes + 1

    argo_self_heal()
    co = r.tick()  # undone twice in a row by the same named writer: a persistent co-writer
    assert r.replicas() == 3
    assert co["lastReasonCode"] == "co_writer", co
    assert "argocd-controller has undone 2 of scaleahead's writes in a row: a persistent co-writer" in co["lastReason"]
    assert r.status_writes() == writes + 2


@pytest.mark.parametrize(
    ("actuation", "code", "says"),
    [
        ({"paused": True}, "paused", "not applied: actuation is paused (kill switch: settings actuation.paused)"),
        ({"dry_run": True}, "dry_run", "not applied: dry run (settings actuation.dry_run): Deployment/shop/web0 spec"),
    ],
)
def test_a_paused_or_dry_run_daemon_says_so_in_the_status(run, actuation, code, says) -> None:  # type: ignore[no-untyped-def]
    r = run(**actuation)
    st = r.tick()
    assert r.replicas() == 3
    assert (st["desiredReplicas"], st["currentReplicas"]) == (8, 3), st
    assert st["lastReasonCode"] == code, st
    assert st["lastReason"].startswith(says) and "; planned: scale " in st["lastReason"], st


def test_a_kill_switch_configmap_shows_as_paused(run) -> None:  # type: ignore[no-untyped-def]
    r = run()
    r.kube.cluster.put(CONFIGMAPS, "scaleahead-system", "scaleahead-kill-switch", {"data": {"paused": "true"}})
    st = r.tick()
    assert r.replicas() == 3
    assert st["lastReasonCode"] == "paused" and "actuation is paused (kill switch:" in st["lastReason"], st


def test_a_refused_write_a_failed_one_and_the_back_off_after_it_each_show_in_the_status(run) -> None:  # type: ignore[no-untyped-def]
    r = run()
    full = "exceeded quota: pods-quota, requested: pods=5, used: pods=10, limited: pods=10"
    r.kube.cluster.faults.append(Fault("PATCH", "/deployments/web0", status=403, message=full))
    refused = r.tick()  # skipped (no back-off): done once the quota has room
    assert r.replicas() == 3
    assert (refused["desiredReplicas"], refused["currentReplicas"]) == (8, 3), refused
    assert refused["lastReasonCode"] == "action_skipped", refused
    assert refused["lastReason"].startswith("not applied: Deployment/shop/web0: the namespace's ResourceQuota "
                                            "shop/pods-quota is full"), refused  # fmt: skip

    rbac = 'deployments.apps "web0" is forbidden: User "x" cannot patch resource "deployments/scale"'
    r.kube.cluster.faults.append(Fault("PATCH", "/deployments/web0", status=403, message=rbac, times=2))
    for _ in range(2):  # failed twice: the workload backs off 10 s, then 20 s (two cycles)
        failed = r.tick()
        assert r.replicas() == 3
        assert failed["lastReasonCode"] == "action_failed", failed
        assert failed["lastReason"].startswith("not applied: the write failed: RBAC forbids 'patch'"), failed

    backing = r.tick()  # sits out this cycle: held back, whatever the plan
    assert r.replicas() == 3
    assert backing["lastReasonCode"] == "backing_off", backing
    assert "not applied: backing off after 2 failed cycles in a row until " in backing["lastReason"], backing
    assert "; planned: hold shop/web0 at 3: no forecast" in backing["lastReason"], backing  # its history not read
    for _ in range(2):  # the back-off is over: applied, and the status says the plan's reason again
        st = r.tick()
    assert r.replicas() == 8
    assert st["lastReasonCode"] not in NOT_APPLIED and not st["lastReason"].startswith("not applied"), st
    assert (st["desiredReplicas"], st["currentReplicas"]) == (8, 8), st


def test_a_throttling_429s_retry_after_is_waited_out_before_the_workload_is_tried_again(run) -> None:  # type: ignore[no-untyped-def]
    """API Priority and Fairness answers 429 with ``Retry-After``. Until 2026-12-07 the wait it asked
    for was ignored: the workload backed off one interval (10 s) and wrote again, into the same
    throttle. Now it sits out at least the wait asked for (45 s: four 10-s cycles after the failure)."""
    r = run()
    r.kube.cluster.faults.append(
        Fault("PATCH", "/deployments/web0", status=429, message="Too many requests", retry_after=45)
    )
    failed = r.tick()
    assert r.replicas() == 3
    assert failed["lastReasonCode"] == "action_failed", failed
    assert "throttling requests (429 on 'patch') and asked to wait 45 s" in failed["lastReason"], failed
    for _ in range(4):  # 10, 20, 30 and 40 s after it: still within the 45 s
        held = r.tick()
        assert r.replicas() == 3
        assert held["lastReasonCode"] == "backing_off", held
    r.tick()  # 50 s after it: tried again, and applied
    assert r.replicas() == 8


def test_a_replica_that_lost_the_lease_during_the_cycle_leaves_the_statuses_to_the_new_leader(run) -> None:  # type: ignore[no-untyped-def]
    """Found by a review: the old leader published "not applied: not the leader" over the status the
    new leader had just written, which the new leader's writer took to be still in place."""
    from kubernetes import client

    r = run()
    act = r.daemon.deps.actuator
    calls: list[float] = []

    def lost(now: float) -> bool:  # the renewal before the write fails: another replica leads now
        if not calls:  # meanwhile the new leader applies the change and writes its status
            r.kube.cluster.edit(DEPLOYMENTS, "shop", "web0", {"spec": {"replicas": 8}})
            client.CustomObjectsApi(r.kube.api_client()).patch_namespaced_custom_object_status(
                GROUP, VERSION, "shop", PLURAL, "web0", {"status": {"lastReasonCode": "forecast", "lastReason": "new"}}
            )
        calls.append(now)
        return False

    act.is_leader = lost
    st = r.tick()
    assert (st["lastReasonCode"], st["lastReason"]) == ("forecast", "new")


def test_a_change_the_actuator_cut_shows_as_limited_with_the_value_written(run) -> None:  # type: ignore[no-untyped-def]
    # Floor mode under an HPA whose maxReplicas is 5: the plan asks for 8 every cycle (the trace
    # needs more), the actuator writes the HPA's minReplicas 5 and then finds it in place. Until
    # 2026-12-06 the status said "forecast", "scale shop/web0 3 -> 8" as if applied (loop reasons
    # audit).
    floor = POLICY.replace("target: {name: web0}", "target: {name: web0, mode: floor, hpaName: web0}")
    r = run(floor)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web0"}, "minReplicas": 2, "maxReplicas": 5},
        "status": {"currentReplicas": 3},
    }
    r.kube.cluster.put(HPAS, "shop", "web0", hpa)
    first = r.tick()
    assert r.kube.cluster.get(HPAS, "shop", "web0")["spec"]["minReplicas"] == 5
    assert first["desiredReplicas"] == 8 and first["lastReasonCode"] == "action_limited", first
    assert first["lastReason"].startswith(
        "applied at 5, not the planned 8: HorizontalPodAutoscaler/shop/web0 spec.minReplicas: 2 -> 5; "
        "capped at the HPA's maxReplicas 5; planned: scale shop/web0 3 -> 8"
    ), first
    for _ in range(9):  # the same code is rewritten at the status's minute refresh
        again = r.tick()
    assert again["lastReasonCode"] == "action_limited", again
    assert again["lastReason"].startswith(
        "in place at 5, not the planned 8: spec.minReplicas is already 5; capped at the HPA's maxReplicas 5; planned:"
    ), again
    # Room under the HPA's maximum: the plan's change is applied whole, and the plan's reason stands.
    hpa = r.kube.cluster.get(HPAS, "shop", "web0")
    r.kube.cluster.put(HPAS, "shop", "web0", {**hpa, "spec": {**hpa["spec"], "maxReplicas": 20}})
    whole = r.tick()
    assert r.kube.cluster.get(HPAS, "shop", "web0")["spec"]["minReplicas"] == 8
    assert whole["lastReasonCode"] not in NOT_APPLIED and whole["lastReason"].startswith("scale"), whole
