"""The plan's age (``actuation.max_plan_age_s``) counted when each action is checked: from the start of
the cycle that read the plan's data, on the actuator's clock, in the daemon and within a plan."""

from __future__ import annotations

import time

import numpy as np
import pytest
from kubeemu import DEPLOYMENTS, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from forecaster import make_model
from scaleahead.clock import VirtualClock
from scaleahead.commands.run import cluster_actuation
from scaleahead.loop import Deps, run_once
from scaleahead.settings import Settings
from scaleahead.types import Plan, Reason, ScaleTo, Series, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
T0 = 1_700_000_000.0


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


class SlowHistory:
    """Rising demand, read slowly: the read takes ``delay_s`` on ``clock`` (a slow Prometheus)."""

    def __init__(self, clock: VirtualClock, delay_s: float) -> None:
        self.clock, self.delay_s = clock, delay_s

    def read(self, policies, now):
        self.clock.sleep(self.delay_s)
        n = 360
        return {p.workload: Series("demand", now - n * 10.0, 10.0, np.linspace(10.0, 100.0, n)) for p in policies}


def loop_cycle(kube, store, read_s: float):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy(max_replicas=50)]
    settings = Settings.model_validate({"actuation": {"max_plan_age_s": 5.0}})
    clock = VirtualClock(T0)
    # as `scaleahead run` builds it: the actuator ages the plan on the daemon's clock
    _, act, _ = cluster_actuation(kube.api_client(), store, pols, settings, clock, "me")
    model = make_model("naive")
    model.fit([SlowHistory(VirtualClock(), 0).read(pols, T0)[pols[0].workload]])
    deps = Deps(SlowHistory(clock, read_s), model, act.target, store, pols, actuator=act)
    return run_once(deps, settings, clock.now())  # the daemon passes its tick's start


def test_a_cycle_whose_history_read_outlasts_max_plan_age_skips_its_actions(kube, store):
    report = loop_cycle(kube, store, read_s=8.0)
    assert [r.outcome for r in report.results] == ["skipped"]
    assert report.results[0].detail == "the plan is 8 s old, older than maxPlanAge 5 s; the next plan decides"
    assert [r.state for r in store.actions(plan_id=report.plan_id)] == ["skipped"]
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2


def test_a_cycle_within_max_plan_age_is_applied(kube, store):
    report = loop_cycle(kube, store, read_s=3.0)
    assert [r.outcome for r in report.results] == ["applied"]


def test_actions_checked_after_max_plan_age_within_one_plan_are_skipped(kube, store):
    """Each live read takes 2 s on the actuator's clock: the first action is checked at 2 s, the
    second at 4 s, past maxPlanAge 3 s, and the third is skipped before its read. (A virtual clock
    the reads advance: with real 2 s reads, a stalled CI machine could add the second that decides.)"""
    for name in ("a", "b", "c"):
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(2))
    pols = [policy(n) for n in ("a", "b", "c")]
    clock = VirtualClock(T0)
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=5)
    real_live = target.live
    reads: list[str] = []

    def slow_live(action, *args):  # type: ignore[no-untyped-def]
        clock.sleep(2.0)
        reads.append(action.workload.name)
        return real_live(action, *args)

    target.live = slow_live  # type: ignore[method-assign]
    act = Actuator(target, store, pols, SafetyConfig(max_plan_age_s=3.0), clock=clock.now)
    now = clock.now()
    plan = Plan(now, tuple(ScaleTo(WorkloadRef("Deployment", "default", n), 2, 4, R) for n in ("a", "b", "c")))
    results = act.apply_plan(plan, now)
    assert reads == ["a", "b"]
    assert [r.outcome for r in results] == ["applied", "skipped", "skipped"]
    assert results[1].detail == "the plan is 4 s old, older than maxPlanAge 3 s; the next plan decides"
    assert [kube.cluster.get(DEPLOYMENTS, "default", n)["spec"]["replicas"] for n in ("a", "b", "c")] == [4, 2, 2]
    assert sorted((r.target, r.state) for r in store.actions()) == [
        ("Deployment/default/a", "applied"),
        ("Deployment/default/b", "skipped"),
        ("Deployment/default/c", "skipped"),
    ]


def test_plan_apply_ages_the_plan_on_the_system_clock(kube, store):
    from scaleahead.commands.actuator import build_actuator

    act = build_actuator([policy()], store, None, api=kube.api_client())
    assert act.clock is time.time
