"""Policies as custom resources, through the official client against the kmock Kubernetes emulator:
read from the cluster (invalid ones skipped), status written only when it changes, reloaded."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import kmock
import pytest
from kubernetes import client

from actuator.policy_resources import GROUP, PLURAL, VERSION, ClusterPolicies, PolicyStatusWriter
from scaleahead.daemon import PolicyStatus


class Emulator:
    """kmock's KubernetesEmulator served on loopback from a background event loop."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.emu: Any = None
        self.url = ""
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with kmock.KubernetesEmulator() as emu, kmock.Server(emu) as srv:
            emu.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = {
                "kind": "PredictiveScalingPolicy",
                "namespaced": True,
                "subresources": ["status"],
            }
            self.emu, self.url = emu, str(srv.url).rstrip("/")
            self.ready.set()
            while not self.stop.is_set():
                await asyncio.sleep(0.02)

    def requests(self, method: str) -> list[Any]:
        return [r for r in list(self.emu._requests) if str(r.method).upper().endswith(method)]


@pytest.fixture
def cluster() -> Iterator[tuple[Emulator, Any]]:
    em = Emulator()
    em.thread.start()
    assert em.ready.wait(20), "the emulator started"
    cfg = client.Configuration()
    cfg.host = em.url
    api = client.ApiClient(cfg)
    yield em, api
    em.stop.set()
    em.thread.join(timeout=5)


def _cr(name: str, ns: str = "shop", **spec: Any) -> dict[str, Any]:
    body = {"target": {"name": name}, "demand": {"query": "sum(rate(x[1m]))"}, "capacityPerReplica": 2, **spec}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def test_policies_are_read_from_custom_resources_and_invalid_ones_are_skipped(cluster) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web", maxReplicas=30))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("bad", minReplicas=9, maxReplicas=3))
    source = ClusterPolicies(api)
    policies = source.load()
    assert [p.metadata.name for p in policies] == ["web"]
    assert policies[0].workload.key == "Deployment/shop/web", "the target namespace defaults to the object's"
    assert policies[0].spec.max_replicas == 30
    assert "minReplicas" in source.invalid["shop/bad"]


def test_skipped_objects_still_name_their_targets_and_a_non_list_answer_is_an_error(cluster) -> None:  # type: ignore[no-untyped-def]
    """A skipped object's target is kept aside (the daemon does not hand back its warm pool), and
    an answer that is not a list of objects (a proxy's page) is an error, not "no policies"."""
    from unittest import mock

    from scaleahead.errors import UserError

    _, api = cluster
    co = client.CustomObjectsApi(api)
    fn = _cr("fn", minReplicas=9, maxReplicas=3)
    fn["spec"]["target"] = {"kind": "KnativeService", "name": "fn"}
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, fn)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    source = ClusterPolicies(api)
    assert [p.metadata.name for p in source.load()] == ["web"]
    assert source.rejected_targets == {"KnativeService/shop/fn"}
    with (
        mock.patch.object(source.custom, "list_cluster_custom_object", return_value="<html>sign in</html>"),
        pytest.raises(UserError, match="not a list of objects"),
    ):
        source.load()


def test_a_malformed_object_is_skipped_on_its_own_and_the_others_are_read(cluster, caplog) -> None:  # type: ignore[no-untyped-def]
    """Before, one object whose spec was not a mapping (``spec: hello``, which a CRD older than the
    controller, or none, lets through) failed every load: ``dictionary update sequence element #0 has
    length 1; 2 is required``, naming no object, writing no status, so no other policy was added,
    removed or changed until it was deleted. Now each malformed object is skipped, logged
    (policy_invalid, with its namespace/name and why) and, when it has a name, its status says why."""
    import logging

    from actuator.policy_resources import publishing_rejections

    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web", maxReplicas=30))
    for name, spec in (("text", "hello"), ("numbers", [1, 2]), ("empty", None), ("seven", 7)):
        body = _cr(name)
        body["spec"] = spec
        co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, body)
    # objects no API server would store, put in the emulator as they are: nothing to name a status by
    resource = f"{GROUP}/{VERSION}/{PLURAL}"
    kind = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PredictiveScalingPolicy"}
    em.emu.objects[resource, "shop", "noname"] = {**kind, "metadata": {"namespace": "shop"}, "spec": _cr("a")["spec"]}
    em.emu.objects[resource, "shop", "nometa"] = {**kind, "spec": _cr("b")["spec"]}
    em.emu.objects[resource, "shop", "textmeta"] = {**kind, "metadata": "m", "spec": _cr("c")["spec"]}

    source = ClusterPolicies(api)
    caplog.set_level(logging.WARNING, logger="scaleahead.actuator.policies")
    load = publishing_rejections(source, PolicyStatusWriter(api), lambda: 1000.0)
    assert [p.workload.key for p in load()] == ["Deployment/shop/web"]

    assert source.invalid["shop/text"] == "malformed object: spec is the string 'hello', not a mapping with " + (
        "target, demand and capacityPerReplica"
    )
    assert source.invalid["shop/numbers"].startswith("malformed object: spec is a list, not a mapping")
    assert source.invalid["shop/empty"].startswith("malformed object: spec is missing (or null)")
    assert source.invalid["shop/seven"].startswith("malformed object: spec is the integer 7, not a mapping")
    unnamed = {k: v for k, v in source.invalid.items() if "/?" in k}
    assert sorted(unnamed.values()) == [
        "malformed object: metadata is missing",
        "malformed object: metadata is the string 'm', not a mapping",
        "malformed object: metadata.name is missing",
    ]
    assert all(" (item " in k and " of the list)" in k for k in unnamed), unnamed
    assert any(k.startswith("shop/? (item ") for k in unnamed), "a nameless object's namespace is still said"

    logged = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "policy_invalid"]
    assert len(logged) == 7, logged
    for key, why in source.invalid.items():
        assert any(key in line and why.removeprefix("malformed object: ") in line for line in logged), (key, logged)

    # the named ones say why in their status; the nameless ones have none to write to
    assert sorted((r.name, r.reason) for r in source.rejected) == [
        ("empty", "InvalidSpec"),
        ("numbers", "InvalidSpec"),
        ("seven", "InvalidSpec"),
        ("text", "InvalidSpec"),
    ]
    for name, said in (("text", "the string 'hello'"), ("numbers", "a list"), ("empty", "missing"), ("seven", "7")):
        cond = _accepted(co, name)
        assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec") and said in cond["message"], cond
        assert cond["_status"]["lastReasonCode"] == "policy_rejected"

    # and the good one's changes are still read: a second good policy is added
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("api"))
    assert sorted(p.workload.key for p in load()) == ["Deployment/shop/api", "Deployment/shop/web"]


def _status(desired: int, t: float, reason: str = "forecast") -> PolicyStatus:
    return PolicyStatus(
        "web", "shop", "Deployment/shop/web", desired, 2, 12.5, "none", f"{reason} text", reason, t, "seasonal_naive"
    )


def test_status_is_written_to_the_subresource_only_when_it_changes(cluster) -> None:  # type: ignore[no-untyped-def]
    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    writer = PolicyStatusWriter(api, refresh_s=60.0)
    writer.publish([_status(4, 1000.0)])
    obj = co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")
    assert obj["status"]["desiredReplicas"] == 4
    assert obj["status"]["forecastPeak"] == 12.5
    assert obj["status"]["fallbackMode"] == "none"
    patches = len(em.requests("PATCH"))
    for t in (1010.0, 1020.0, 1030.0):  # same decision every 10 s: no writes
        writer.publish([_status(4, t)])
    assert len(em.requests("PATCH")) == patches
    writer.publish([_status(6, 1040.0)])  # a new decision: written at once
    assert len(em.requests("PATCH")) == patches + 1
    writer.publish([_status(6, 1105.0)])  # unchanged but older than refresh_s: refreshed
    assert len(em.requests("PATCH")) == patches + 2
    assert co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")["status"]["desiredReplicas"] == 6


def test_the_writer_forgets_policy_objects_gone_for_an_hour(cluster) -> None:  # type: ignore[no-untyped-def]
    """Policies that came and went stayed in the writer's maps for ever (the soak audit: 4,004
    entries after 1,000 policies churned, with 8 live); one not published for an hour is forgotten,
    while one published every cycle keeps its condition's lastTransitionTime."""
    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    writer = PolicyStatusWriter(api, refresh_s=60.0)
    for i in range(50):  # 50 short-lived policies (their objects are gone: the writes fail, logged)
        writer.publish([PolicyStatus(f"old{i}", "shop", f"Deployment/shop/old{i}", 1, 1, None, "none", "x", "x",
                                     1000.0 + i, "m")])  # fmt: skip
    for t in range(1100, 1100 + 3700, 10):
        writer.publish([_status(4, float(t))])
    assert set(writer._last) == set(writer._since) == {("shop", "web")}
    assert set(writer._seen) == {("shop", "web")}
    status = co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")["status"]
    assert status["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:18:20Z"  # 1100 s: kept


def test_a_status_for_a_deleted_policy_does_not_stop_the_others(cluster) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    gone = PolicyStatus("gone", "shop", "Deployment/shop/gone", 1, 1, None, "current", "x", "x", 1.0, "m")
    writer = PolicyStatusWriter(api)
    writer.publish([gone, _status(3, 1.0)])
    assert co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")["status"]["desiredReplicas"] == 3


def test_the_daemon_reloads_policies_from_the_cluster_and_writes_their_status(cluster, daemon_factory) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web0", maxReplicas=60))
    source = ClusterPolicies(api)
    daemon, clock, _, _ = daemon_factory(
        n=1, policy_source=source.load, status_sink=PolicyStatusWriter(api), policy_reload_s=30.0
    )
    daemon.run(lambda: False, max_ticks=2)
    status = co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web0")["status"]
    assert status["desiredReplicas"] >= 1 and status["lastReason"]
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web1", maxReplicas=60))
    daemon.run(lambda: False, max_ticks=5)  # past the 30 s reload
    assert {p.metadata.name for p in daemon.deps.policies} == {"web0", "web1"}
    daemon.run(lambda: False, max_ticks=2)
    assert "status" in co.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web1")


def _accepted(co: Any, name: str, ns: str = "shop") -> dict[str, Any]:
    status = co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name).get("status") or {}
    found = [c for c in status.get("conditions", []) if c["type"] == "Accepted"]
    assert len(found) == 1, f"one Accepted condition in {status}"
    return {**found[0], "_status": status}


def test_skipped_policies_say_why_in_their_status_and_a_fixed_one_is_accepted(cluster, daemon_factory) -> None:  # type: ignore[no-untyped-def]
    """An invalid object and a second policy for a planned target get Accepted False with the reason;
    fixing the invalid one flips it to True and its stale decision fields are gone."""
    from actuator.policy_resources import publishing_rejections

    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web0", maxReplicas=60))
    dup = _cr("web0", maxReplicas=60)
    dup["metadata"]["name"] = "web0-copy"
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, dup)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web1", minReplicas=9, maxReplicas=3))
    source = ClusterPolicies(api)
    writer = PolicyStatusWriter(api)
    clocks: list[Any] = []
    load = publishing_rejections(source, writer, lambda: clocks[0].now())
    daemon, clock, _, _ = daemon_factory(n=2, status_sink=writer, policy_source=load, policy_reload_s=30.0)
    clocks.append(clock)
    daemon.reload_policies(clock.now())
    assert {p.metadata.name for p in daemon.deps.policies} == {"web0"}
    daemon.run(lambda: False, max_ticks=2)

    ok = _accepted(co, "web0")
    assert ok["status"] == "True" and ok["reason"] == "Planned" and ok["_status"]["desiredReplicas"] >= 1
    copy = _accepted(co, "web0-copy")
    assert copy["status"] == "False" and copy["reason"] == "DuplicateTarget"
    assert "shop/web0" in copy["message"] and "Deployment/shop/web0" in copy["message"]
    assert copy["_status"]["lastReasonCode"] == "policy_rejected"
    bad = _accepted(co, "web1")
    assert bad["status"] == "False" and bad["reason"] == "InvalidSpec" and "minReplicas" in bad["message"]
    assert "desiredReplicas" not in bad["_status"], "a skipped policy shows no decision"
    since = bad["lastTransitionTime"]

    co.patch_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web1", {"spec": {"minReplicas": 1}})
    daemon.run(lambda: False, max_ticks=5)  # past the 30 s reload, then a cycle plans it
    assert {p.metadata.name for p in daemon.deps.policies} == {"web0", "web1"}
    fixed = _accepted(co, "web1")
    assert fixed["status"] == "True" and fixed["_status"]["lastReasonCode"] != "policy_rejected"
    assert fixed["lastTransitionTime"] > since and fixed["_status"]["desiredReplicas"] >= 1


def test_a_policy_refused_by_the_check_is_skipped_and_the_others_are_read(cluster) -> None:  # type: ignore[no-untyped-def]
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("web"))
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("slow", demand={"query": "q", "stepSeconds": 60})
    )
    source = ClusterPolicies(api, check=lambda p: "too slow" if p.spec.demand.step_seconds == 60 else None)
    assert [p.metadata.name for p in source.load()] == ["web"]
    assert [(r.name, r.reason) for r in source.rejected] == [("slow", "Refused")]
    assert source.invalid["shop/slow"] == "too slow"


def test_a_policy_object_may_not_scale_a_workload_of_another_namespace(cluster) -> None:  # type: ignore[no-untyped-def]
    """Before, a policy created in team-a with target.namespace kube-system was planned: anyone who
    may create policies in one namespace could have scaleahead (allowed to scale Deployments in every
    namespace) scale the workloads of any other."""
    from actuator.policy_resources import publishing_rejections

    _, api = cluster
    co = client.CustomObjectsApi(api)
    mine = _cr("mine", ns="team-a")
    mine["spec"]["target"] = {"namespace": "kube-system", "name": "coredns"}
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, mine)
    own = _cr("web", ns="team-a")
    own["spec"]["target"] = {"namespace": "team-a", "name": "web"}  # its own namespace, written out
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, own)
    bad = _cr("bad", ns="team-a", minReplicas=9, maxReplicas=3)
    bad["spec"]["target"] = {"kind": "KnativeService", "namespace": "kube-system", "name": "fn"}
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, bad)

    source = ClusterPolicies(api)
    load = publishing_rejections(source, PolicyStatusWriter(api), lambda: 1000.0)
    assert [p.workload.key for p in load()] == ["Deployment/team-a/web"]
    refused = {r.name: r for r in source.rejected}
    assert refused["mine"].reason == "Refused"
    assert "'kube-system' is not this policy's own namespace 'team-a'" in refused["mine"].message
    assert "SCALEAHEAD_ACTUATION__CROSS_NAMESPACE_TARGETS=true" in refused["mine"].message
    assert refused["bad"].reason == "InvalidSpec"
    # neither claims the other namespace's workloads (the daemon would keep them from being released)
    assert source.rejected_targets == set()
    status = co.get_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "mine")["status"]
    (cond,) = status["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "Refused") and "own namespace" in cond["message"]

    allowed = ClusterPolicies(api, cross_namespace=True)
    assert sorted(p.workload.key for p in allowed.load()) == ["Deployment/kube-system/coredns", "Deployment/team-a/web"]
    assert allowed.rejected_targets == {"KnativeService/kube-system/fn"}


def test_cross_namespace_targets_is_a_setting_off_by_default() -> None:
    from scaleahead.policy import parse_policies
    from scaleahead.settings import Settings

    assert Settings().actuation.cross_namespace_targets is False
    env = {"SCALEAHEAD_ACTUATION__CROSS_NAMESPACE_TARGETS": "true"}
    assert Settings.from_env(env).actuation.cross_namespace_targets is True
    # a policy file is the operator's own: it may name any namespace
    text = (
        "metadata: {name: dns, namespace: team-a}\n"
        "spec: {target: {namespace: kube-system, name: coredns}, demand: {query: q}, capacityPerReplica: 2}\n"
    )
    assert parse_policies(text)[0].workload.key == "Deployment/kube-system/coredns"


def test_run_with_cluster_policies_and_a_trace_skips_a_policy_at_another_step(cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``scaleahead run`` end to end: the 60 s policy cannot be planned from a 10 s trace; the 10 s one is."""
    import json

    from typer.testing import CliRunner

    from scaleahead.cli import app

    em, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("web", demand={"query": "q", "stepSeconds": 10})
    )
    co.create_namespaced_custom_object(
        GROUP, VERSION, "shop", PLURAL, _cr("slow", demand={"query": "q", "stepSeconds": 60})
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emu, cluster: {{server: '{em.url}'}}}}]\n"
        "users: [{name: me, user: {token: test}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: me}}]\ncurrent-context: emu\n"
    )
    argv = ["run", "--once", "--virtual", "--no-server", "--history", "trace:nasa-10s", "--target", "memory"]
    argv += ["--kubeconfig", str(kubeconfig), "--db", f"sqlite:///{tmp_path / 'r.db'}", "--model", "seasonal_naive"]
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout[out.stdout.index("{") :])
    assert [a["target"] for a in summary["actions"]] == ["Deployment/shop/web"]
    slow = _accepted(co, "slow")
    assert slow["status"] == "False" and slow["reason"] == "Refused"
    assert "stepSeconds is 60" in slow["message"] and "nasa-10s is at 10 s steps" in slow["message"]
    assert _accepted(co, "web")["status"] == "True"


def _kubeconfig(path, server: str):  # type: ignore[no-untyped-def]
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: me, user: {token: test}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: me}}]\ncurrent-context: c\n"
    )
    return path


@pytest.mark.parametrize("answer", ["404", "unreachable"])
def test_cluster_policies_that_cannot_be_listed_are_one_error_paragraph(tmp_path, answer: str) -> None:  # type: ignore[no-untyped-def]
    """``run``, ``retrain`` and ``actuator reconcile`` without --policies: exit 2 and what to do, no traceback."""
    import http.server
    import socket
    import subprocess
    import sys
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
            body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = None
    if answer == "404":
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url, says = f"http://127.0.0.1:{server.server_address[1]}", "HTTP 404"
    else:
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            url, says = f"http://127.0.0.1:{s.getsockname()[1]}", "did not answer"
    kc = _kubeconfig(tmp_path / "kc", url)
    db = f"sqlite:///{tmp_path / 'x.db'}"
    env = {**__import__("os").environ, "SCALEAHEAD_ACTUATION__REQUEST_TIMEOUT_S": "2"}
    try:
        for argv in (
            ["run", "--once", "--virtual", "--no-server", "--history", "trace:nasa-10s", "--target", "memory"],
            ["retrain", "--history", "trace:nasa-10s"],
            ["actuator", "reconcile"],
        ):
            out = subprocess.run(
                [sys.executable, "-m", "scaleahead.cli", *argv, "--kubeconfig", str(kc), "--db", db],
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
            )
            assert out.returncode == 2, (argv, out.stderr[-2000:])
            if argv[0] == "actuator" and answer == "unreachable":
                # the one-shot command asks the server first (newcomer audit): what, and nothing done
                text = " ".join(out.stderr.split())
                assert f"Cannot reach the Kubernetes API server at {url}: NewConnectionError:" in text, text
                assert "Connection refused. Nothing was changed or recorded." in text, text
            else:
                assert "Cannot list the PredictiveScalingPolicy objects" in out.stderr and says in out.stderr
            assert "Traceback" not in out.stderr
    finally:
        if server is not None:
            server.shutdown()


def test_a_new_duplicate_does_not_take_a_workload_from_the_policy_planned_for_it(cluster, caplog) -> None:  # type: ignore[no-untyped-def]
    """Before 2026-12-06 the first object in the API server's list order (namespace, then name) won:
    a new ``a-web-test`` took the workload (and its mode and bounds) from a long-planned ``web`` at
    the next reload. Now the one planned at the last load keeps it, else the oldest; the log line
    names both objects and the workload."""
    import logging

    _, api = cluster
    co = client.CustomObjectsApi(api)
    web = _cr("web", maxReplicas=40)
    web["metadata"]["creationTimestamp"] = "2026-01-05T10:00:00Z"
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, web)
    source = ClusterPolicies(api)
    assert [p.metadata.name for p in source.load()] == ["web"]
    new = _cr("a-web-test", maxReplicas=3)
    new["spec"]["target"] = {"name": "web"}
    new["metadata"]["creationTimestamp"] = "2026-12-06T00:00:00Z"
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, new)
    with caplog.at_level(logging.WARNING, logger="scaleahead.actuator.policies"):
        kept = source.load()
    assert [(p.metadata.name, p.spec.max_replicas) for p in kept] == [("web", 40)]
    (dup,) = source.rejected
    assert (dup.name, dup.reason) == ("a-web-test", "DuplicateTarget")
    assert dup.message.startswith("another policy, shop/web, already targets Deployment/shop/web")
    assert any(
        "shop/a-web-test is skipped: shop/web already targets Deployment/shop/web" in r.getMessage()
        for r in caplog.records
    )
    # a new process (nothing planned yet): the oldest object wins, not the first listed
    fresh = ClusterPolicies(api)
    assert [p.metadata.name for p in fresh.load()] == ["web"]
    # the planned one gone: the other takes over; it keeps the workload when the old one is back
    co.delete_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web")
    assert [p.metadata.name for p in source.load()] == ["a-web-test"]
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, web)
    assert [p.metadata.name for p in source.load()] == ["a-web-test"]


def test_two_floor_policies_naming_one_hpa_are_duplicates(cluster) -> None:  # type: ignore[no-untyped-def]
    """Two policies in mode floor naming one HPA (a copy-paste slip) each set its minReplicas from
    their own forecast: before 2026-12-06 both were planned and overwrote each other every cycle."""
    _, api = cluster
    co = client.CustomObjectsApi(api)
    for name in ("web", "api"):
        body = _cr(name)
        body["spec"]["target"] = {"name": name, "mode": "floor", "hpaName": "web-hpa"}
        co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, body)
    source = ClusterPolicies(api)
    assert [p.metadata.name for p in source.load()] == ["web"]  # no creation times: the first listed
    (dup,) = source.rejected
    assert (dup.name, dup.reason) == ("api", "DuplicateTarget")
    assert "another policy, shop/web, in mode floor already names HorizontalPodAutoscaler/shop/web-hpa" in dup.message
    assert "Deployment/shop/api" in source.rejected_targets, "still claimed"


def test_a_cluster_policys_tenant_is_its_namespace_and_one_naming_another_is_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    """secaudit finding 2: ``spec.tenant`` naming another tenant escaped the policy's own limit in
    ``loop.capacity`` and drew on the other's; an unknown name was never limited."""
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("plain", ns="team-a"))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("dflt", ns="team-a", tenant="default"))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("own", ns="team-a", tenant="team-a"))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("victim", ns="team-a", tenant="team-b"))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("free", ns="team-a", tenant="nobody"))

    source = ClusterPolicies(api)  # the default: the tenant is the namespace
    assert {p.metadata.name: p.spec.tenant for p in source.load()} == {
        "plain": "team-a",
        "dflt": "team-a",
        "own": "team-a",
    }
    refused = {r.name: r for r in source.rejected}
    assert sorted(refused) == ["free", "victim"]
    assert {r.reason for r in refused.values()} == {"Refused"}
    msg = refused["victim"].message
    assert "spec.tenant 'team-b' is not this policy's own namespace 'team-a'" in msg
    assert "Drop spec.tenant" in msg and "SCALEAHEAD_ACTUATION__TENANT_FROM_NAMESPACE=false" in msg
    # refused, but its workload (in its own namespace) is still claimed: not handed back meanwhile
    assert source.rejected_targets == {"Deployment/team-a/victim", "Deployment/team-a/free"}

    from actuator.policy_resources import PolicyLimits

    trusting = ClusterPolicies(api, limits=PolicyLimits(tenant_from_namespace=False))
    assert {p.metadata.name: p.spec.tenant for p in trusting.load()} == {
        "plain": "default",
        "dflt": "default",
        "own": "team-a",
        "victim": "team-b",
        "free": "nobody",
    }


def test_cluster_policies_above_the_operators_priority_weight_or_below_its_memory_bound_are_refused(cluster) -> None:  # type: ignore[no-untyped-def]
    """secaudit findings 2 and 7: priority 2e9 or weight 1e300 took a whole shared capacity; a
    declared memoryMbPerInstance of 0.001 MB was kept warm before everyone else."""
    from actuator.policy_resources import PolicyLimits

    _, api = cluster
    co = client.CustomObjectsApi(api)
    fn = {"kind": "KnativeService"}
    for name, spec in {
        "at": {"priority": 10, "weight": 4},
        "high": {"priority": 2_000_000_000},
        "heavy": {"weight": 1e300},
        "tiny": {"workloadClass": "function", "warmPool": {"enabled": True, "memoryMbPerInstance": 0.001}},
        "sized": {"workloadClass": "function", "warmPool": {"enabled": True, "memoryMbPerInstance": 64}},
        "cold": {"workloadClass": "function", "warmPool": {"enabled": False, "memoryMbPerInstance": 0.001}},
    }.items():
        body = _cr(name, ns="team-a", **spec)
        if "warmPool" in spec:
            body["spec"]["target"] = {**fn, "name": name}
        co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, body)

    assert len(ClusterPolicies(api).load()) == 6  # no bounds by default
    limits = PolicyLimits(max_priority=10, max_weight=4, min_memory_mb_per_instance=16)
    source = ClusterPolicies(api, limits=limits)
    assert sorted(p.metadata.name for p in source.load()) == ["at", "cold", "sized"]
    refused = {r.name: r for r in source.rejected}
    assert sorted(refused) == ["heavy", "high", "tiny"] and {r.reason for r in refused.values()} == {"Refused"}
    assert "spec.priority 2000000000 is above the operator's bound 10" in refused["high"].message
    assert "SCALEAHEAD_ACTUATION__MAX_POLICY_PRIORITY" in refused["high"].message
    assert "spec.weight 1e+300 is above the operator's bound 4" in refused["heavy"].message
    assert "spec.warmPool.memoryMbPerInstance 0.001 is below the operator's bound 16" in refused["tiny"].message


def test_a_tenants_cluster_policy_floors_may_not_pass_its_capacity(cluster) -> None:  # type: ignore[no-untyped-def]
    """secaudit finding 2: floors are served before any limit, so ``minReplicas: 100`` got 20 times its
    tenant's limit of 5 (and more than the whole capacity of 30)."""
    from actuator.policy_resources import PolicyLimits

    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("a1", ns="team-a", minReplicas=3))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("a2", ns="team-a", minReplicas=3))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("a3", ns="team-a", minReplicas=2))
    big = _cr("big", ns="team-c", minReplicas=100, maxReplicas=200)
    co.create_namespaced_custom_object(GROUP, VERSION, "team-c", PLURAL, big)
    co.create_namespaced_custom_object(GROUP, VERSION, "team-b", PLURAL, _cr("b1", ns="team-b", minReplicas=20))

    capacity = {"team-a": 5, "team-b": 30, "*": 30}
    source = ClusterPolicies(api, limits=PolicyLimits(capacity=capacity))
    # a1 (first) keeps its 3; a2's 3 more would make 6 > 5; a3's 2 fit; team-c has no entry but '*' is 30
    assert sorted(p.metadata.name for p in source.load()) == ["a1", "a3", "b1"]
    refused = {r.name: r for r in source.rejected}
    assert sorted(refused) == ["a2", "big"]
    assert "spec.minReplicas 3 with the 3 its other policies hold is above tenant team-a's capacity 5" in (
        refused["a2"].message
    )
    assert "Lower minReplicas to at most 2" in refused["a2"].message
    # against '*', every tenant's floors count: a1's 3 and a3's 2 (checked before it)
    assert "spec.minReplicas 100 with the 5 all other policies hold is above the whole ('*') capacity 30" in (
        refused["big"].message
    )
    assert source.rejected_targets == {"Deployment/team-a/a2", "Deployment/team-c/big"}
    assert sorted(p.metadata.name for p in ClusterPolicies(api).load()) == ["a1", "a2", "a3", "b1", "big"]


def test_the_floors_of_all_tenants_together_may_not_pass_the_whole_capacity(cluster) -> None:  # type: ignore[no-untyped-def]
    """Each tenant's floors fit its entry, but together they pass ``*``: the later policy is refused.
    Until 2026-12-06 each tenant's own floors were compared with ``*`` (left by the security audit)."""
    from actuator.policy_resources import PolicyLimits

    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("a1", ns="team-a", minReplicas=8))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-b", PLURAL, _cr("b1", ns="team-b", minReplicas=8))
    co.create_namespaced_custom_object(GROUP, VERSION, "team-b", PLURAL, _cr("b2", ns="team-b", minReplicas=2))
    source = ClusterPolicies(api, limits=PolicyLimits(capacity={"team-a": 10, "team-b": 10, "*": 12}))
    assert sorted(p.metadata.name for p in source.load()) == ["a1", "b2"]
    (refused,) = source.rejected
    assert refused.name == "b1"
    assert "spec.minReplicas 8 with the 8 all other policies hold is above the whole ('*') capacity 12" in (
        refused.message
    )
    assert "Lower minReplicas to at most 4" in refused.message


def test_policy_limits_come_from_the_actuation_settings() -> None:
    from actuator.policy_resources import PolicyLimits
    from scaleahead.settings import Settings

    default = PolicyLimits.from_settings(Settings())
    assert default == PolicyLimits() and default.tenant_from_namespace is True
    env = {
        "SCALEAHEAD_ACTUATION__TENANT_FROM_NAMESPACE": "false",
        "SCALEAHEAD_ACTUATION__MAX_POLICY_PRIORITY": "100",
        "SCALEAHEAD_ACTUATION__MAX_POLICY_WEIGHT": "10",
        "SCALEAHEAD_ACTUATION__MIN_POLICY_MEMORY_MB_PER_INSTANCE": "64",
        "SCALEAHEAD_LOOP__CAPACITY": "shop=40,*=200",
    }
    assert PolicyLimits.from_settings(Settings.from_env(env)) == PolicyLimits(
        tenant_from_namespace=False,
        max_priority=100,
        max_weight=10,
        min_memory_mb_per_instance=64,
        capacity={"shop": 40, "*": 200},
    )
    off = Settings.from_env({**env, "SCALEAHEAD_ACTUATION__POLICY_FLOORS_WITHIN_CAPACITY": "false"})
    assert PolicyLimits.from_settings(off).capacity == {}


def test_run_keeps_a_cluster_policy_within_its_namespaces_capacity(cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """secaudit finding 2 end to end (``scaleahead run`` with loop.capacity): the policy of team-a that
    names team-b as its tenant is refused, so it neither escapes team-a's limit of 5 nor draws on
    team-b's 30; team-a's own policy (no spec.tenant) is held to 5."""
    import json

    from typer.testing import CliRunner

    from scaleahead.cli import app

    em, api = cluster
    co = client.CustomObjectsApi(api)
    spec = {"capacityPerReplica": 0.5, "maxReplicas": 100, "minReplicas": 1, "maxStepUp": 100}
    co.create_namespaced_custom_object(
        GROUP, VERSION, "team-b", PLURAL, _cr("web", ns="team-b", tenant="team-b", **spec)
    )
    co.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, _cr("web", ns="team-a", **spec))
    co.create_namespaced_custom_object(
        GROUP, VERSION, "team-a", PLURAL, _cr("api", ns="team-a", tenant="team-b", **spec)
    )
    argv = ["run", "--once", "--virtual", "--no-server", "--history", "trace:nasa-10s", "--target", "memory"]
    argv += ["--kubeconfig", str(_kubeconfig(tmp_path / "kubeconfig", em.url))]
    argv += ["--db", f"sqlite:///{tmp_path / 'r.db'}", "--model", "seasonal_naive"]
    out = CliRunner().invoke(app, argv, env={"SCALEAHEAD_LOOP__CAPACITY": "team-a=5,team-b=30,*=30"})
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout[out.stdout.index("{") :])
    got = {a["target"]: a["to"] for a in summary["actions"]}
    # each wants more than 60 replicas: team-a is held to its 5, team-b gets the rest of the 30
    assert got == {"Deployment/team-a/web": 5, "Deployment/team-b/web": 25}
    spy = _accepted(co, "api", ns="team-a")
    assert spy["status"] == "False" and spy["reason"] == "Refused"
    assert "spec.tenant 'team-b' is not this policy's own namespace 'team-a'" in spy["message"]
