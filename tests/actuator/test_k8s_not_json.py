"""Answers that are not JSON (an authenticating proxy's HTML login page with status 200): every
action still gets a clear outcome in the journal, and the rest of the plan goes on."""

from __future__ import annotations

import pytest
from kubeemu import CONFIGMAPS, DEPLOYMENTS, LEASES, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.leader import LeaderElector
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
LOGIN = "<html><body>Sign in</body></html>"


def scale(name: str, frm: int = 2, to: int = 4) -> ScaleTo:
    return ScaleTo(WorkloadRef("Deployment", "default", name), frm, to, R)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def two_deployments(kube, store, **kw):
    for name in ("a", "b"):
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(2))
    pols = [policy(n) for n in ("a", "b")]
    return Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2), store, pols, **kw)


def test_an_html_answer_fails_that_action_and_the_rest_of_the_plan_is_applied(kube, store):
    act = two_deployments(kube, store)
    kube.cluster.faults.append(Fault("GET", "/deployments/a/scale", html=LOGIN))
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["failed", "applied"]
    assert results[0].detail.startswith("Deployment/default/a: the API server's answer to 'get' on deployments/scale")
    assert "not JSON (text/html" in results[0].detail and "a proxy in between?" in results[0].detail
    rows = {r.target: r.state for r in store.actions()}
    assert rows == {"Deployment/default/a": "failed", "Deployment/default/b": "applied"}
    assert kube.cluster.get(DEPLOYMENTS, "default", "a")["spec"]["replicas"] == 2  # nothing acted on garbage
    assert kube.cluster.get(DEPLOYMENTS, "default", "b")["spec"]["replicas"] == 4


def test_an_html_answer_to_a_write_fails_the_action_and_keeps_the_intent_for_the_next_read(kube, store):
    act = two_deployments(kube, store)
    kube.cluster.faults.append(Fault("PATCH", "/deployments/a/scale", html=LOGIN))
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["failed", "applied"]
    # the write did not land (the proxy answered): the next cycle sees no human edit and writes
    mf = store.managed_field("Deployment/default/a")
    assert mf is not None and mf.resource_version.startswith("intent:4:")
    again = act.apply_plan(Plan(NOW + 30, (scale("a"),)), NOW + 30)
    assert [r.outcome for r in again] == ["applied"]


def test_a_json_answer_that_is_not_an_object_fails_the_action(kube, store, monkeypatch):
    act = two_deployments(kube, store)
    real = act.target.apps.read_namespaced_deployment_scale

    class Listed:
        data = b"[1, 2]"
        headers = {"Content-Type": "application/json"}

    def read(name, *args, **kwargs):
        return Listed() if name == "a" else real(name, *args, **kwargs)

    monkeypatch.setattr(act.target.apps, "read_namespaced_deployment_scale", read)
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["failed", "applied"]
    assert "is not JSON (a JSON list, not an object" in results[0].detail


def test_an_unexpected_exception_in_one_action_fails_it_and_the_plan_goes_on(kube, store, monkeypatch):
    act = two_deployments(kube, store)
    real = act.target.live

    def live(action):
        if action.target.endswith("/a"):
            raise KeyError("surprise")
        return real(action)

    monkeypatch.setattr(act.target, "live", live)
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["failed", "applied"]
    assert results[0].detail == "Deployment/default/a: unexpected KeyError: 'surprise'; retried next cycle"
    assert {r.target: r.state for r in store.actions()} == {
        "Deployment/default/a": "failed",
        "Deployment/default/b": "applied",
    }


def test_an_html_answer_to_the_kill_switch_read_pauses_the_plan(kube, store):
    act = two_deployments(kube, store, kill_switch=None)
    target = act.target
    act.kill_switch = lambda: target.kill_switch("scaleahead", "scaleahead-kill-switch")
    kube.cluster.put(CONFIGMAPS, "scaleahead", "scaleahead-kill-switch", {"data": {"paused": "false"}})
    kube.cluster.faults.append(Fault("GET", "/configmaps/scaleahead-kill-switch", html=LOGIN))
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["skipped", "skipped"]
    assert "cannot read ConfigMap scaleahead/scaleahead-kill-switch" in results[0].detail
    assert "not JSON" in results[0].detail
    assert {r.state for r in store.actions()} == {"skipped"}


def test_an_html_answer_to_the_lease_read_means_not_leader(kube):
    elector = LeaderElector(kube.api_client(), "scaleahead", "me")
    assert elector.is_leader(NOW)
    kube.cluster.faults.append(Fault("GET", "/leases/scaleahead-leader", html=LOGIN))
    assert not elector.is_leader(NOW + 1)
    assert "lease scaleahead/scaleahead-leader" in elector.last_error
    assert kube.cluster.get(LEASES, "scaleahead", "scaleahead-leader") is not None
    kube.cluster.faults.append(Fault("GET", "/leases/scaleahead-leader", html=LOGIN))
    elector.release(NOW + 2)  # a not-JSON answer on release gives up quietly too


def test_a_kill_switch_read_that_times_out_pauses_the_plan_and_says_there_was_no_answer(kube, store):
    """It said "(MaxRetryError)" alone (found by the fault-injection audit of 2026-12-05)."""
    act = two_deployments(kube, store, kill_switch=None)
    act.target.timeout_s = 0.5  # type: ignore[attr-defined]
    target = act.target
    act.kill_switch = lambda: target.kill_switch("scaleahead", "scaleahead-kill-switch")
    kube.cluster.put(CONFIGMAPS, "scaleahead", "scaleahead-kill-switch", {"data": {"paused": "false"}})
    kube.cluster.faults.append(Fault("GET", "/configmaps/scaleahead-kill-switch", delay_s=2.0))
    results = act.apply_plan(Plan(NOW, (scale("a"), scale("b"))), NOW)
    assert [r.outcome for r in results] == ["skipped", "skipped"]
    said = "cannot read ConfigMap scaleahead/scaleahead-kill-switch (no answer from the API server: "
    assert said in results[0].detail, results[0].detail
