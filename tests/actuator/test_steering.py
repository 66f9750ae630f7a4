"""Steering the replacement of a moved ReplicaSet/StatefulSet pod: the steer, the webhook, HTTPS, bad input.

The webhook is called over real HTTPS (a certificate made by deploy/webhook/gen-cert.sh) with the
AdmissionReview the API server sends for a pod a ReplicaSet creates (data/); its JSONPatch is
applied with an independent RFC 6902 implementation (``jsonpatch``) and the pod is then created
in the emulated cluster through the official client, as the API server would after admission.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from kubeemu import PDBS, PODS, Fault
from kubernetes import client as k8s

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from actuator.steering import STEERED_TO, WEBHOOK_PATH, SteeringWebhook, affinity_patch, serve_webhook
from scaleahead.types import MovePod, Plan, Reason
from storage import Store

REPO = Path(__file__).resolve().parents[2]
REVIEW = json.loads((Path(__file__).parent / "data" / "admission_review_replicaset_pod.json").read_text())
RS = "web-7c5ddbdf54"
R = Reason("rebalance", "free node n1")
NOW = 1_000_000.0
TTL = 300.0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def now(self) -> float:  # the daemon's clock interface (scaleahead.clock)
        return self.t


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'steer.db'}")
    yield s
    s.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    # Service name "localhost": the certificate then names the host the test connects to.
    subprocess.run(["sh", str(REPO / "deploy" / "webhook" / "gen-cert.sh"), str(out), "localhost"], check=True)
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def https(store, certs, clock):
    """The webhook served over HTTPS on a free loopback port; yields a function that POSTs a body.
    Its budget is 30 s, not 1.5 s: no test served here is about it, and each must steer on a slow machine."""
    webhook = SteeringWebhook(store, clock)
    webhook.budget_s = 30.0
    server = serve_webhook(webhook, "127.0.0.1", 0, str(certs / "tls.crt"), str(certs / "tls.key"))
    port = server.server_address[1]
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))

    def post(body: bytes, path: str = WEBHOOK_PATH) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    post.webhook = webhook  # type: ignore[attr-defined]
    post.webhook_port = port  # type: ignore[attr-defined]
    post.certs = certs  # type: ignore[attr-defined]
    yield post
    server.shutdown()
    server.server_close()


def review(owner_kind: str = "ReplicaSet", owner_name: str = RS, uid: str = "u-1", **request: Any) -> dict[str, Any]:
    r = copy.deepcopy(REVIEW)
    r["request"]["uid"] = uid
    r["request"]["object"]["metadata"]["ownerReferences"][0].update(kind=owner_kind, name=owner_name)
    r["request"].update(request)
    return r


def patched(pod: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    resp = answer["response"]
    if "patch" not in resp:
        return pod
    assert resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    return jsonpatch.apply_patch(pod, ops)


def owned_pod(node: str, kind: str = "ReplicaSet", owner: str = RS) -> dict[str, Any]:
    meta = {
        "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "controller": True, "uid": "u"}],
    }
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}


def actuator(kube, store, ttl: float | None = TTL) -> Actuator:
    return Actuator(KubernetesTarget(kube.api_client(), [], timeout_s=2.0), store, [], SafetyConfig(), steer_ttl_s=ttl)


def required_nodes(pod: dict[str, Any]) -> list[list[str]]:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [
        [v for f in t.get("matchFields", []) if f["key"] == "metadata.name" for v in f["values"]]
        for t in terms["nodeSelectorTerms"]
    ]


# -- the eviction flow records a steer ---------------------------------------------------------------
def test_moving_a_replicaset_pod_records_a_steer_for_its_replacement_then_evicts_it(kube, store):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "applied", res
    assert f"the replacement from ReplicaSet {RS} is steered to n2" in res.detail
    (steer,) = store.steers()
    assert (steer.namespace, steer.owner_kind, steer.owner_name, steer.node) == ("default", "ReplicaSet", RS, "n2")
    assert (steer.state, steer.evicted_pod, steer.expires_at) == ("pending", "web-7c5ddbdf54-abcde", NOW + TTL)
    assert kube.cluster.get(PODS, "default", "web-7c5ddbdf54-abcde") is None
    assert ("POST", "/api/v1/namespaces/default/pods/web-7c5ddbdf54-abcde/eviction") in kube.cluster.writes()
    # The journal keeps the steer with the action.
    (row,) = store.actions()
    assert "steered to n2" in row.outcome


def test_an_eviction_that_fails_cancels_the_steer_it_recorded_first(kube, store):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    kube.cluster.faults.append(Fault("POST", "/eviction", status=500))
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "failed"
    (steer,) = store.steers()
    assert steer.state == "cancelled"
    assert kube.cluster.get(PODS, "default", "web-7c5ddbdf54-abcde") is not None


def test_a_move_refused_by_its_pdb_records_no_steer(kube, store):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    kube.cluster.put(
        PDBS,
        "default",
        "web",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 0}},
    )
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "skipped"
    assert store.steers() == []


def test_without_the_webhook_enabled_no_steer_is_recorded(kube, store):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store, ttl=None).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "applied"
    assert store.steers() == []


def test_a_statefulset_pod_move_is_steered_too(kube, store):
    kube.cluster.put(PODS, "default", "db-0", owned_pod("n1", "StatefulSet", "db"))
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (MovePod("default", "db-0", "n1", "n3", R),)), NOW)
    assert res.outcome == "applied"
    (steer,) = store.steers()
    assert (steer.owner_kind, steer.owner_name, steer.node) == ("StatefulSet", "db", "n3")


# -- end to end: eviction, the controller's new pod through the webhook over HTTPS -----------------------
def test_the_first_new_pod_of_the_owner_lands_on_the_planned_node_and_the_second_is_not_steered(kube, store, https):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "applied", res
    core = k8s.CoreV1Api(kube.api_client())

    # The ReplicaSet controller replaces the pod; the API server asks the webhook first.
    status, answer = https(json.dumps(review(uid="first")).encode())
    assert status == 200
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "first" and answer["response"]["allowed"] is True
    pod = patched(review()["request"]["object"], answer)
    pod["metadata"]["name"] = "web-7c5ddbdf54-fghij"
    core.create_namespaced_pod("default", pod)
    created = kube.cluster.get(PODS, "default", "web-7c5ddbdf54-fghij")
    assert required_nodes(created) == [["n2"]]
    assert created["metadata"]["annotations"][STEERED_TO] == "n2"
    (steer,) = store.steers()
    assert steer.state == "consumed" and "web-7c5ddbdf54-" in steer.consumed_by

    # A second new pod of the same ReplicaSet (say a scale-up) is left to the scheduler.
    status, answer = https(json.dumps(review(uid="second")).encode())
    assert status == 200 and answer["response"] == {"uid": "second", "allowed": True}
    assert https.webhook.counts == {"steered": 1, "passed": 1, "errors": 0}


def test_two_moves_from_one_replicaset_steer_its_next_two_pods_in_order(store, https):
    store.add_steer("default", "ReplicaSet", RS, "a", "n2", NOW, TTL)
    store.add_steer("default", "ReplicaSet", RS, "b", "n3", NOW, TTL)
    nodes = []
    for uid in ("p1", "p2", "p3"):
        _, answer = https(json.dumps(review(uid=uid)).encode())
        pod = patched(review()["request"]["object"], answer)
        nodes.append(required_nodes(pod) if "affinity" in pod["spec"] else None)
    assert nodes == [[["n2"]], [["n3"]], None]


def test_a_pod_of_another_owner_or_namespace_is_not_steered(store, https):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    for r in (review(owner_name="api-5d9f"), review(namespace="other"), review(owner_kind="Job")):
        _, answer = https(json.dumps(r).encode())
        assert "patch" not in answer["response"] and answer["response"]["allowed"] is True
    assert store.steers()[0].state == "pending"


def test_a_dry_run_request_does_not_consume_the_steer(store, https):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    _, answer = https(json.dumps(review(dryRun=True)).encode())
    assert "patch" not in answer["response"]
    assert store.steers()[0].state == "pending"


# -- expiry --------------------------------------------------------------------------------------------
def test_an_expired_steer_steers_nothing_and_is_reported_by_the_actuator(kube, store, https, clock, caplog):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    act = actuator(kube, store)
    act.apply_plan(Plan(NOW, (MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R),)), NOW)
    clock.t = NOW + TTL + 1  # the replacement came too late (or never)
    _, answer = https(json.dumps(review()).encode())
    assert "patch" not in answer["response"]
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator"):
        (reported,) = act.report_steers(clock.t)
    assert reported.id == 1 and reported.node == "n2"
    assert act.report_steers(clock.t + 60) == []  # reported once
    (steer,) = store.steers()
    assert steer.state == "expired"
    assert any("pod steer 1 expired unused" in r.getMessage() and "n2" in r.getMessage() for r in caplog.records)


def test_a_steer_just_before_its_expiry_is_still_consumed(store, https, clock):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    clock.t = NOW + TTL - 0.5
    _, answer = https(json.dumps(review()).encode())
    assert required_nodes(patched(review()["request"]["object"], answer)) == [["n2"]]


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "uid"),
    [
        (b"{not json", ""),
        (b"[]", ""),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), ""),
        (json.dumps({"request": {"operation": "CREATE"}}).encode(), ""),
        (
            json.dumps({"request": {"uid": "u-9", "operation": "CREATE", "resource": {"resource": "pods"}}}).encode(),
            "u-9",
        ),
        (
            json.dumps(
                {"request": {"uid": "u-8", "operation": "CREATE", "resource": {"resource": "pods"}, "object": "pod"}}
            ).encode(),
            "u-8",
        ),
    ],
)
def test_a_malformed_review_is_allowed_without_a_patch_and_logged(store, https, caplog, body, uid):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    with caplog.at_level(logging.WARNING, logger="scaleahead.steering"):
        status, answer = https(body)
    assert status == 200
    assert answer["response"] == {"uid": uid, "allowed": True}
    assert any(
        "pod steering webhook" in r.getMessage() and "allowed unchanged" in r.getMessage() for r in caplog.records
    )
    assert store.steers()[0].state == "pending"
    assert https.webhook.counts["errors"] == 1


@pytest.mark.parametrize("length", ["-5", "abc", str(64 * 1024 * 1024)])
def test_a_refused_body_length_is_answered_allowed_and_counted_as_an_error(store, https, length):
    """The refusal was answered but counted nowhere: scaleahead_webhook_reviews_total did not see
    it (found in the audit of 2026-12-05)."""
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    context = ssl.create_default_context(cafile=str(https.certs / "ca.crt"))
    conn = http.client.HTTPSConnection("localhost", https.webhook_port, context=context, timeout=10)
    try:
        conn.putrequest("POST", WEBHOOK_PATH)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", length)
        conn.endheaders()
        resp = conn.getresponse()
        status, answer = resp.status, json.loads(resp.read())
    finally:
        conn.close()
    assert status == 200 and answer["response"] == {"uid": "", "allowed": True}
    assert https.webhook.counts == {"steered": 0, "passed": 0, "errors": 1}
    assert store.steers()[0].state == "pending"


def test_a_database_error_still_allows_the_pod_unchanged(store, clock, caplog):
    webhook = SteeringWebhook(store, clock)
    with store.engine.begin() as conn:  # the steers' table is gone (a broken or wrong database)
        conn.exec_driver_sql("DROP TABLE pod_steers")
    with caplog.at_level(logging.WARNING, logger="scaleahead.steering"):
        answer = webhook.review(json.dumps(review(uid="db-down")).encode())
    assert answer["response"] == {"uid": "db-down", "allowed": True}
    assert any("OperationalError" in r.getMessage() for r in caplog.records)


def test_the_server_answers_404_on_any_other_path(https):
    status, _ = https(b"{}", path="/other")
    assert status == 404


# -- the patch itself ------------------------------------------------------------------------------------
def test_required_affinity_is_anded_into_every_existing_node_selector_term():
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                            {
                                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}],
                                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}],
                            },
                        ]
                    }
                }
            }
        }
    }
    out = jsonpatch.apply_patch(pod, affinity_patch(pod, "n2"))
    terms = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 2  # not widened by an extra (ORed) term
    assert terms[0]["matchExpressions"] == [{"key": "zone", "operator": "In", "values": ["a"]}]
    assert terms[0]["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]
    assert terms[1]["matchFields"][-1] == {"key": "metadata.name", "operator": "In", "values": ["n2"]}
    assert len(terms[1]["matchFields"]) == 2


def test_required_affinity_keeps_an_existing_pod_affinity_and_adds_node_affinity_beside_it():
    pod = {"spec": {"affinity": {"podAntiAffinity": {"x": 1}}}}
    out = jsonpatch.apply_patch(pod, affinity_patch(pod, "n2"))
    assert out["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
    assert required_nodes(out) == [["n2"]]


def test_preferred_affinity_appends_a_weight_100_preference_to_existing_ones():
    pref = {"weight": 5, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
    pod = {"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [pref]}}}}
    out = jsonpatch.apply_patch(pod, affinity_patch(pod, "n2", "preferred"))
    prefs = out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert prefs == [
        pref,
        {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}},
    ]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in out["spec"]["affinity"]["nodeAffinity"]


def test_a_pod_already_bound_to_a_node_is_not_patched(store, clock):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    r = review()
    r["request"]["object"]["spec"]["nodeName"] = "n7"
    answer = SteeringWebhook(store, clock).review(json.dumps(r).encode())
    assert "patch" not in answer["response"]


# -- storage: one steer, one pod, even with racing replicas --------------------------------------------------
def test_two_webhook_replicas_racing_for_one_steer_steer_exactly_one_pod(db_url):
    stores = [Store(db_url), Store(db_url, upgrade=False)]
    try:
        stores[0].add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
        got: list[object] = []
        barrier = threading.Barrier(8)

        def take(i: int) -> None:
            barrier.wait()
            got.append(stores[i % 2].consume_steer("default", "ReplicaSet", RS, f"pod-{i}", NOW + 1))

        threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sum(1 for g in got if g is not None) == 1
        (steer,) = stores[0].steers()
        assert steer.state == "consumed"
    finally:
        for s in stores:
            s.close()


# -- the command ----------------------------------------------------------------------------------------
def test_the_steers_command_lists_steers_and_reports_the_overdue_ones_as_expired(tmp_path):
    import sys

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    old = store.add_steer("default", "ReplicaSet", RS, "p-old", "n2", 1000.0, TTL)  # long overdue
    store.close()
    res = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "steers", "--db", url, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["newly_expired"] == [old]
    assert doc["steers"][0]["state"] == "expired" and doc["steers"][0]["node"] == "n2"
    bad = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "steers", "--db", url, "--state", "lost"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "not a steer state" in bad.stderr


# -- the daemon serves it ---------------------------------------------------------------------------------
def webhook_settings(folder: Path, **extra: str) -> Any:
    """Settings serving the webhook on a free loopback port with the certificate in ``folder``."""
    from scaleahead.settings import Settings

    env = {
        "SCALEAHEAD_WEBHOOK__ENABLED": "true",
        "SCALEAHEAD_WEBHOOK__HOST": "127.0.0.1",
        "SCALEAHEAD_WEBHOOK__PORT": "0",
        "SCALEAHEAD_WEBHOOK__CERT_FILE": str(folder / "tls.crt"),
        "SCALEAHEAD_WEBHOOK__KEY_FILE": str(folder / "tls.key"),
    }
    return Settings.from_env(env | {f"SCALEAHEAD_WEBHOOK__{k.upper()}": v for k, v in extra.items()})


def test_the_daemon_serves_the_webhook_with_its_settings(store, certs, monkeypatch):
    from scaleahead.commands.run import _serve_steering

    monkeypatch.setattr(SteeringWebhook, "budget_s", 30.0)  # not about the budget: steered on a slow machine too
    settings = webhook_settings(certs, affinity="preferred")
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    server = _serve_steering(settings, store, Clock(NOW))
    try:
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        conn = http.client.HTTPSConnection("localhost", server.server_address[1], context=context, timeout=10)
        conn.request("POST", WEBHOOK_PATH, body=json.dumps(review()).encode())
        answer = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    pod = patched(review()["request"]["object"], answer)
    prefs = pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert prefs[0]["weight"] == 100 and prefs[0]["preference"]["matchFields"][0]["values"] == ["n2"]


def _handshake(port: int, ca: Path) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("localhost", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost"),
    ):
        pass


def test_a_certificate_that_comes_later_is_served_then_and_a_renewed_one_is_reloaded(
    store, certs, tmp_path_factory, caplog
):
    from scaleahead.commands.run import _serve_steering

    mounted = tmp_path_factory.mktemp("mounted")  # the Secret's volume, empty at first
    settings = webhook_settings(mounted)
    with caplog.at_level(logging.ERROR, logger="scaleahead.run"):
        pending = _serve_steering(settings, store, Clock(NOW), retry_s=3600)
    assert pending.server is None and not pending.try_start()
    assert any("not served yet" in r.getMessage() for r in caplog.records)
    for name in ("tls.crt", "tls.key"):
        shutil.copy(certs / name, mounted / name)
    assert pending.try_start()  # what its retry thread does every retry_s
    port = pending.server.server_address[1]
    try:
        _handshake(port, certs / "ca.crt")
        renewed = tmp_path_factory.mktemp("renewed")
        subprocess.run(["sh", str(REPO / "deploy" / "webhook" / "gen-cert.sh"), str(renewed), "localhost"], check=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(renewed / name, mounted / name)
        assert pending.server.tls.reload_if_changed()  # what its watcher does every 60 s
        assert not pending.server.tls.reload_if_changed(), "unchanged files are not reloaded"
        _handshake(port, renewed / "ca.crt")
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(port, certs / "ca.crt")
    finally:
        pending.shutdown()


def test_an_eviction_that_lands_but_answers_too_late_is_applied_and_keeps_its_steer(kube, store):
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", owned_pod("n1"))
    # The server evicts the pod, then answers after the client's 2 s timeout (3 s after it: the
    # emulator shares the test's process, so a stalled process must not let the answer in time).
    kube.cluster.faults.append(Fault("POST", "/eviction", delay_s=5.0, after=True))
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "applied", res
    (steer,) = store.steers()
    assert steer.state == "pending", "its replacement is still steered"
    assert kube.cluster.get(PODS, "default", "web-7c5ddbdf54-abcde") is None


def test_a_pod_already_terminating_is_not_evicted_again(kube, store):
    # Evicted by another replica or shard a moment ago: a second eviction would pass no PDB check
    # and steer its owner's next pod a second time.
    pod = owned_pod("n1")
    pod["metadata"]["deletionTimestamp"] = "2026-12-05T01:00:00Z"
    kube.cluster.put(PODS, "default", "web-7c5ddbdf54-abcde", pod)
    move = MovePod("default", "web-7c5ddbdf54-abcde", "n1", "n2", R)
    (res,) = actuator(kube, store).apply_plan(Plan(NOW, (move,)), NOW)
    assert res.outcome == "skipped" and "terminating" in res.detail, res
    assert store.steers() == []
    assert not any("eviction" in path for _, path in kube.cluster.writes())


# -- review of 2026-12-05: the servers under idle clients, renewals and a slow database ------------
def test_an_idle_connection_does_not_stop_the_webhook_for_anyone_else(store, https):
    # A client that connects and never says hello (a half-open connection, any pod in the cluster):
    # the handshake runs on that connection's own thread, not in accept() on the serving one.
    port = https.webhook_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as idle:
        idle.settimeout(5)
        store.add_steer("default", "ReplicaSet", RS, "old-pod", "n2", NOW, TTL)
        started = time.monotonic()
        status, answer = https(json.dumps(review()).encode())
        assert status == 200 and answer["response"]["allowed"] and "patch" in answer["response"]
        # (served after the idle connection, it would wait for that one's 5 s handshake timeout, or more)
        assert time.monotonic() - started < 4.0, "answered while the idle connection sat there"


def test_a_renewed_certificate_with_the_old_key_keeps_the_old_pair_serving(store, certs, tmp_path_factory, caplog):
    mounted = tmp_path_factory.mktemp("half-renewed")
    for name in ("tls.crt", "tls.key"):
        shutil.copy(certs / name, mounted / name)
    server = serve_webhook(
        SteeringWebhook(store, Clock(NOW)), "127.0.0.1", 0, str(mounted / "tls.crt"), str(mounted / "tls.key")
    )
    port = server.server_address[1]
    try:
        renewed = tmp_path_factory.mktemp("renewed-cert")
        subprocess.run(["sh", str(REPO / "deploy" / "webhook" / "gen-cert.sh"), str(renewed), "localhost"], check=True)
        shutil.copy(renewed / "tls.crt", mounted / "tls.crt")  # the certificate written, the key not yet
        with caplog.at_level(logging.WARNING, logger="actuator.steering"):
            assert not server.tls.reload_if_changed()
        assert any("not reloaded" in r.getMessage() for r in caplog.records)
        _handshake(port, certs / "ca.crt")  # still served with the old pair
        shutil.copy(renewed / "tls.key", mounted / "tls.key")  # now the key: the pair loads
        assert server.tls.reload_if_changed()
        _handshake(port, renewed / "ca.crt")
    finally:
        server.shutdown()
        server.server_close()


def test_a_steer_taken_too_late_to_be_answered_stays_pending(tmp_path, clock):
    """The API server drops an answer after the webhook's timeoutSeconds (2 s): a steer consumed
    after that would be marked used for a pod created unsteered."""
    import sqlite3

    path = tmp_path / "slow.db"
    store = Store(f"sqlite:///{path}")
    store.add_steer("default", "ReplicaSet", RS, "old-pod", "n2", NOW, TTL)
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN IMMEDIATE")  # another writer holds the database for 3 s
    threading.Timer(3.0, lambda: locker.execute("COMMIT")).start()
    webhook = SteeringWebhook(store, clock)
    answer = webhook.review(json.dumps(review()).encode())
    assert "patch" not in answer["response"], "not steered: too late"
    (steer,) = store.steers()
    assert steer.state == "pending", "left for the next pod of the owner"
    # A deadline already past is the same at the store.
    assert store.consume_steer("default", "ReplicaSet", RS, "p", NOW, deadline=time.monotonic() - 1) is None
    assert store.steers()[0].state == "pending"
    store.close()


def test_the_metrics_server_lets_go_of_a_client_that_sends_nothing(monkeypatch):
    from scaleahead.observability import Health, Metrics, _Handler, serve

    assert _Handler.timeout == 10.0, "shipped: a silent client gives up its thread after 10 s"
    monkeypatch.setattr(_Handler, "timeout", 0.5)  # the same mechanism, faster
    server = serve(Metrics(), Health(60.0, time.time), "127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as idle:
            idle.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the headers never finish
            idle.settimeout(5)
            started = time.monotonic()
            assert idle.recv(1024) == b"", "the server closed the connection"
            assert time.monotonic() - started < 4.0
    finally:
        server.shutdown()


def test_each_review_is_counted_for_the_daemons_metric(store, clock):
    seen: list[str] = []
    webhook = SteeringWebhook(store, clock, on_review=seen.append)
    webhook.budget_s = 30.0  # not about the budget: steered on a slow machine too
    store.add_steer("default", "ReplicaSet", RS, "old-pod", "n2", NOW, TTL)
    webhook.review(json.dumps(review()).encode())  # steered
    webhook.review(json.dumps(review(uid="u-2")).encode())  # no steer left: passed
    webhook.review(b"not json")  # errors
    assert seen == ["steered", "passed", "errors"]


def test_a_steer_whose_row_another_replica_holds_past_the_deadline_is_not_an_error(postgres_url):
    """PostgreSQL's lock timeout (set from the deadline) is running out of time, not a failure."""
    import psycopg

    name = f"steer{int(time.time() * 1e6) % 10**9}"
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    store = Store(url)
    try:
        sid = store.add_steer("default", "ReplicaSet", RS, "old-pod", "n2", NOW, TTL)
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as other:
            other.execute("SELECT id FROM pod_steers WHERE id = %s FOR UPDATE", (sid,))  # held, not committed
            started = time.monotonic()
            assert store.consume_steer("default", "ReplicaSet", RS, "p", NOW, deadline=started + 0.5) is None
            assert time.monotonic() - started < 4.0  # the 0.5 s, with room for a slow machine (no bound: forever)
            other.rollback()
        assert store.steers()[0].state == "pending"
    finally:
        store.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
