"""Readiness times from the Kubernetes target: pods found by selector, created -> Ready, recent only;
the loop keeps each pod's first one (StartupBook)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from kubeemu import DEPLOYMENTS, PODS, STATEFULSETS, Fault, deployment, policy

from actuator.kubernetes import KubernetesTarget
from forecaster import make_model
from planner.startup import StartupEstimate
from scaleahead.clock import VirtualClock
from scaleahead.loop import Deps, StartupBook, run_once
from scaleahead.settings import Settings
from scaleahead.types import ScaleTo, Series, WorkloadRef

NOW = 1_800_000_000.0
WEB = WorkloadRef("Deployment", "default", "web")
API = WorkloadRef("Deployment", "default", "api")
DB = WorkloadRef("StatefulSet", "default", "db")


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(labels: dict[str, str], created: float, ready_after: float | None) -> dict[str, Any]:
    """A pod created at ``created`` that became Ready ``ready_after`` s later (None: not Ready)."""
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(created + 1)}]
    if ready_after is None:
        conditions.append({"type": "Ready", "status": "False", "lastTransitionTime": stamp(created + 1)})
    else:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": stamp(created + ready_after)})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": labels, "creationTimestamp": stamp(created)},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "conditions": conditions},
    }


def target(kube: Any) -> KubernetesTarget:
    return KubernetesTarget(kube.api_client(), [], timeout_s=2.0, clock=VirtualClock(NOW))


def test_readiness_times_are_ready_transition_minus_creation_of_the_workloads_pods_oldest_first(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3, labels={"app": "web"}))
    kube.cluster.put(PODS, "default", "web-b", pod({"app": "web", "pod-template-hash": "b"}, NOW - 600, 75))
    kube.cluster.put(PODS, "default", "web-a", pod({"app": "web", "pod-template-hash": "a"}, NOW - 1200, 62))
    kube.cluster.put(PODS, "default", "web-c", pod({"app": "web"}, NOW - 60, None))  # still starting
    kube.cluster.put(PODS, "default", "other", pod({"app": "other"}, NOW - 600, 5))  # not selected
    state = target(kube).read_state([WEB]).workloads[WEB]
    assert state.startup_samples == (62.0, 75.0)


def test_pods_created_before_the_sample_window_give_no_readiness_time(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(PODS, "default", "old", pod({"app": "web"}, NOW - 3 * 3600, 3000))  # a flap hours later
    kube.cluster.put(PODS, "default", "new", pod({"app": "web"}, NOW - 300, 80))
    assert target(kube).read_state([WEB]).workloads[WEB].startup_samples == (80.0,)
    wide = KubernetesTarget(kube.api_client(), [], clock=VirtualClock(NOW), sample_window_s=4 * 3600)
    assert wide.read_state([WEB]).workloads[WEB].startup_samples == (3000.0, 80.0)


def test_match_expressions_and_statefulsets_select_their_pods(kube):
    sel = {"matchLabels": {"tier": "be"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]}
    api = deployment(1)
    api["spec"]["selector"] = sel
    kube.cluster.put(DEPLOYMENTS, "default", "api", api)
    kube.cluster.put(STATEFULSETS, "default", "db", deployment(1, labels={"app": "db"}) | {"kind": "StatefulSet"})
    kube.cluster.put(PODS, "default", "api-0", pod({"tier": "be", "app": "api"}, NOW - 100, 40))
    kube.cluster.put(PODS, "default", "cache-0", pod({"tier": "be", "app": "cache"}, NOW - 100, 4))
    kube.cluster.put(PODS, "default", "db-0", pod({"app": "db"}, NOW - 900, 210))
    state = target(kube).read_state([API, DB])
    assert state.workloads[API].startup_samples == (40.0,)
    assert state.workloads[DB].startup_samples == (210.0,)


def test_pods_are_listed_once_per_namespace_however_many_workloads(kube):
    for name in ("web", "api"):
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(1, labels={"app": name}))
        kube.cluster.put(PODS, "default", f"{name}-0", pod({"app": name}, NOW - 100, 30))
    state = target(kube).read_state([WEB, API])
    assert state.workloads[WEB].startup_samples == state.workloads[API].startup_samples == (30.0,)
    lists = [p for m, p in kube.cluster.calls() if m == "GET" and p.endswith("/pods")]
    assert lists == ["/api/v1/namespaces/default/pods"]


def test_a_forbidden_pod_list_leaves_the_replicas_read_and_no_readiness_times(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(4, ready=3))
    kube.cluster.put(PODS, "default", "web-0", pod({"app": "web"}, NOW - 100, 30))
    kube.cluster.faults.append(Fault("GET", "/namespaces/default/pods", status=403))
    state = target(kube).read_state([WEB]).workloads[WEB]
    assert (state.replicas, state.ready_replicas, state.startup_samples) == (4, 3, ())


def test_a_pod_with_unparseable_timestamps_is_skipped(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    bad = pod({"app": "web"}, NOW - 100, 30)
    bad["status"]["conditions"][1]["lastTransitionTime"] = "yesterday"
    kube.cluster.put(PODS, "default", "bad", bad)
    kube.cluster.put(PODS, "default", "good", pod({"app": "web"}, NOW - 100, 45))
    assert target(kube).read_state([WEB]).workloads[WEB].startup_samples == (45.0,)


class SteadyDemand:
    """Flat demand of 45 req/s in 10 s steps, strictly before ``now``."""

    def read(self, policies, now):
        return {p.workload: Series("demand", now - 3600.0, 10.0, np.full(360, 45.0)) for p in policies}


def test_the_loop_plans_with_the_start_up_delay_read_from_the_clusters_pods(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    for i in range(6):  # six pods that each took 120 s (+ i) to become Ready
        kube.cluster.put(PODS, "default", f"web-{i}", pod({"app": "web"}, NOW - 1800 + 60 * i, 120 + i))
    pols = [policy(max_replicas=50)]  # startupSeconds 60 (the default)
    target = KubernetesTarget(kube.api_client(), pols, clock=VirtualClock(NOW))
    deps = Deps(SteadyDemand(), make_model("naive"), target, None, pols)
    report = run_once(deps, Settings(), NOW, dry_run=True)
    est = report.startup[WEB]
    assert (est.seconds, est.configured_seconds, est.used) == (125.0, 60.0, 6)
    assert report.plan.notes == (
        "default/web: start-up 125 s learned: p90 of the last 6 readiness times (configured 60 s)",
    )
    action = report.plan.actions[0]
    assert isinstance(action, ScaleTo) and action.reason.code == "forecast"
    assert "(start-up 125 s)" in action.reason.message


def _learned(book: StartupBook, kube: Any, now: float) -> StartupEstimate | None:
    p = policy("web")
    state = KubernetesTarget(kube.api_client(), [], timeout_s=2.0, clock=VirtualClock(now)).read_state([WEB])
    return book.apply([p], state)[1].get(WEB)


def test_the_learned_delay_outlives_the_hour_of_pods_the_target_reads(kube):
    """Pods older than sample_window_s give no readiness time; the loop keeps the ones it saw."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(6, labels={"app": "web"}))
    for i in range(6):  # a scale-up of 6 pods at NOW - 3700 s, each Ready after 90 s
        kube.cluster.put(PODS, "default", f"web-{i}", pod({"app": "web"}, NOW - 3700 + i, 90))
    book = StartupBook()
    early = _learned(book, kube, NOW - 3000)
    assert early is not None and (early.seconds, early.used) == (90.0, 6)
    assert target(kube).read_state([WEB]).workloads[WEB].startup_samples == ()  # an hour later: none read
    late = _learned(book, kube, NOW)
    assert late is not None and (late.seconds, late.used) == (90.0, 6)
    assert _learned(StartupBook(), kube, NOW) is None  # what a book that never saw them knows


def test_a_readiness_flap_after_a_normal_start_keeps_the_first_readiness_time(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(6, labels={"app": "web"}))
    for i in range(6):
        kube.cluster.put(PODS, "default", f"web-{i}", pod({"app": "web"}, NOW - 1200 + i, 60))
    book = StartupBook()
    first = _learned(book, kube, NOW - 1100)
    assert first is not None and first.seconds == 60.0
    # web-5 goes unready for a probe blip and is Ready again at 610 s: its lastTransitionTime moves
    kube.cluster.put(PODS, "default", "web-5", pod({"app": "web"}, NOW - 1195, 610))
    assert 610.0 in target(kube).read_state([WEB]).workloads[WEB].startup_samples
    after = _learned(book, kube, NOW)
    assert after is not None and after.seconds == 60.0 and after.used == 6


def test_a_pod_whose_container_restarted_gives_no_readiness_time(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    restarted = pod({"app": "web"}, NOW - 600, 500)  # Ready again 500 s in, after a crash
    restarted["status"]["containerStatuses"] = [{"name": "c", "restartCount": 1, "ready": True}]
    kube.cluster.put(PODS, "default", "restarted", restarted)
    fine = pod({"app": "web"}, NOW - 600, 70)
    fine["metadata"]["uid"] = "0b7c-uid"
    fine["status"]["containerStatuses"] = [{"name": "c", "restartCount": 0, "ready": True}]
    kube.cluster.put(PODS, "default", "fine", fine)
    state = target(kube).read_state([WEB]).workloads[WEB]
    assert (state.startup_samples, state.startup_pods) == ((70.0,), ("0b7c-uid",))


def test_the_loop_keeps_the_readiness_times_of_pods_older_than_the_hour(kube):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    for i in range(6):  # six pods that each took 120 s (+ i) to become Ready, 50 minutes ago
        kube.cluster.put(PODS, "default", f"web-{i}", pod({"app": "web"}, NOW - 3000 + 60 * i, 120 + i))
    pols = [policy(max_replicas=50)]
    clock = VirtualClock(NOW)
    deps = Deps(SteadyDemand(), make_model("naive"), KubernetesTarget(kube.api_client(), pols, clock=clock), None, pols)
    assert run_once(deps, Settings(), NOW, dry_run=True).startup[WEB].seconds == 125.0
    clock.advance_to(NOW + 1800)  # every pod is now older than the target's hour
    report = run_once(deps, Settings(), NOW + 1800, dry_run=True)
    assert report.startup[WEB].seconds == 125.0 and report.startup[WEB].used == 6
