"""The steering webhook serves only clients with a certificate its client CA signed (security audit, finding 6).

Until 2026-12-06 the webhook authenticated no client: any pod that could reach port 8443 (the base
NetworkPolicy opens it to every source) could POST a review claiming another namespace and owner,
consume that tenant's pending steer (its real replacement pod then went unsteered) and learn the
planned node. With ``webhook.client_ca_file`` the TLS server requires a client certificate signed
by that CA (the one the API server presents from its admission configuration's kubeConfigFile).

Real HTTPS on a loopback port: the serving certificate from deploy/webhook/gen-cert.sh, the client
CA and the API server's client certificate from deploy/webhook/gen-client-cert.sh.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import logging
import shutil
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from actuator.steering import STEERED_TO, WEBHOOK_PATH, SteeringWebhook, serve_webhook
from storage import Store

REPO = Path(__file__).resolve().parents[2]
REVIEW = json.loads((Path(__file__).parent / "data" / "admission_review_replicaset_pod.json").read_text())
RS = "web-7c5ddbdf54"
NOW = 1_000_000.0
TTL = 300.0


def _script(name: str, out: Path, *args: str) -> Path:
    subprocess.run(
        ["sh", str(REPO / "deploy" / "webhook" / name), str(out), *args], check=True, capture_output=True, timeout=60
    )
    return out


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    # Service name "localhost": the serving certificate then names the host the test connects to.
    return _script("gen-cert.sh", tmp_path_factory.mktemp("serving"), "localhost")


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> Path:
    """The client CA and the API server's client certificate (CN scaleahead-webhook-client)."""
    return _script("gen-client-cert.sh", tmp_path_factory.mktemp("client"))


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> Path:
    """Another CA and a client certificate it signed: what a forger could make for themselves."""
    return _script("gen-client-cert.sh", tmp_path_factory.mktemp("other"))


@pytest.fixture(autouse=True)
def long_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here is about the webhook's budget (1.5 s shipped): each review that must steer does,
    on a slow machine too."""
    monkeypatch.setattr(SteeringWebhook, "budget_s", 30.0)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'steer.db'}")
    yield s
    s.close()


class Refusals(logging.Handler):
    """Collects the server's ``webhook_client_refused`` records; ``wait`` blocks until one arrives
    (the server logs on its connection's thread, possibly after the client saw the refusal)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "webhook_client_refused":
            self.records.append(record)
            self.seen.set()

    def wait(self) -> str:
        assert self.seen.wait(10), "the refusal was not logged"
        return self.records[-1].getMessage()


@pytest.fixture
def refusals():
    handler = Refusals()
    logger = logging.getLogger("scaleahead.steering")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def serve(store: Store, certs: Path, **tls: Any) -> Any:
    webhook = SteeringWebhook(store, lambda: NOW)
    server = serve_webhook(webhook, "127.0.0.1", 0, str(certs / "tls.crt"), str(certs / "tls.key"), **tls)
    server.webhook = webhook
    return server


def post(port: int, certs: Path, cert: tuple[Path, Path] | None = None, uid: str = "u-1") -> dict[str, Any]:
    """POST the API server's review of a ReplicaSet's new pod in ``default``, as the client ``cert``."""
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    review = copy.deepcopy(REVIEW)
    review["request"]["uid"] = uid
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request(
            "POST", WEBHOOK_PATH, body=json.dumps(review).encode(), headers={"Content-Type": "application/json"}
        )
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def refused(port: int, certs: Path, cert: tuple[Path, Path] | None = None, uid: str = "u-1") -> None:
    """The POST fails: the server ends the handshake (an alert, or a reset, depending on timing)."""
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post(port, certs, cert, uid)


def apiserver(client: Path) -> tuple[Path, Path]:
    return client / "apiserver-client.crt", client / "apiserver-client.key"


def test_with_a_client_ca_a_forged_review_without_a_certificate_is_refused_and_consumes_no_steer(
    store, certs, client, refusals
):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    server = serve(store, certs, client_ca_file=str(client / "client-ca.crt"))
    port = server.server_address[1]
    try:
        refused(port, certs, uid="forged")
        assert "no client certificate signed by" in refusals.wait()
        assert [s.state for s in store.steers()] == ["pending"], "the forged review consumed the steer"
        assert server.webhook.counts == {"steered": 0, "passed": 0, "errors": 0}, "nothing of it was read"
        # The API server, with the certificate its admission configuration gives it, is served.
        answer = post(port, certs, cert=apiserver(client), uid="real")
    finally:
        server.shutdown()
        server.server_close()
    assert answer["response"]["uid"] == "real" and answer["response"]["allowed"] is True
    assert "patch" in answer["response"]
    (steer,) = store.steers()
    assert steer.state == "consumed" and server.webhook.counts["steered"] == 1


def test_a_client_certificate_signed_by_another_ca_is_refused(store, certs, client, other, refusals):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    server = serve(store, certs, client_ca_file=str(client / "client-ca.crt"))
    try:
        refused(server.server_address[1], certs, cert=apiserver(other), uid="forged")
        assert "no client certificate signed by" in refusals.wait()
    finally:
        server.shutdown()
        server.server_close()
    assert [s.state for s in store.steers()] == ["pending"]


def test_with_a_client_name_a_certificate_of_the_ca_with_another_name_is_refused(store, certs, client, refusals):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    ca = str(client / "client-ca.crt")
    wrong = serve(store, certs, client_ca_file=ca, client_name="front-proxy-client")
    try:
        refused(wrong.server_address[1], certs, cert=apiserver(client), uid="other-name")
        message = refusals.wait()
        assert "scaleahead-webhook-client" in message and "front-proxy-client" in message
    finally:
        wrong.shutdown()
        wrong.server_close()
    assert [s.state for s in store.steers()] == ["pending"]
    right = serve(store, certs, client_ca_file=ca, client_name="scaleahead-webhook-client")
    try:
        answer = post(right.server_address[1], certs, cert=apiserver(client), uid="right-name")
    finally:
        right.shutdown()
        right.server_close()
    assert "patch" in answer["response"] and [s.state for s in store.steers()] == ["consumed"]


def test_without_a_client_ca_any_client_is_served_as_before(store, certs, client):
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    store.add_steer("default", "ReplicaSet", RS, "old-2", "n3", NOW, TTL)
    server = serve(store, certs)
    try:
        bare = post(server.server_address[1], certs, uid="no-cert")
        with_cert = post(server.server_address[1], certs, cert=apiserver(client), uid="with-cert")
    finally:
        server.shutdown()
        server.server_close()
    assert "patch" in bare["response"] and "patch" in with_cert["response"]
    assert [s.state for s in store.steers()] == ["consumed", "consumed"]


def test_a_renewed_client_ca_is_reloaded_with_the_serving_pair(store, certs, client, other, tmp_path):
    mounted = tmp_path / "client-ca.crt"
    shutil.copy(client / "client-ca.crt", mounted)
    server = serve(store, certs, client_ca_file=str(mounted))
    port = server.server_address[1]
    try:
        assert "response" in post(port, certs, cert=apiserver(client), uid="before")
        shutil.copy(other / "client-ca.crt", mounted)  # the API server's certificate is re-issued by a new CA
        assert server.tls.reload_if_changed()  # what its watcher does every 60 s
        refused(port, certs, cert=apiserver(client), uid="old-ca")
        assert "response" in post(port, certs, cert=apiserver(other), uid="new-ca")
    finally:
        server.shutdown()
        server.server_close()


def test_client_authentication_without_https_or_a_client_name_without_a_ca_is_refused(store, certs, client):
    webhook = SteeringWebhook(store, lambda: NOW)
    with pytest.raises(ValueError, match="only checked over HTTPS"):
        serve_webhook(webhook, "127.0.0.1", 0, client_ca_file=str(client / "client-ca.crt"))
    with pytest.raises(ValueError, match="only checked with a client CA"):
        serve_webhook(webhook, "127.0.0.1", 0, str(certs / "tls.crt"), str(certs / "tls.key"), client_name="x")


# -- the daemon --------------------------------------------------------------------------------------------
def settings(certs: Path, **extra: str) -> Any:
    from scaleahead.settings import Settings

    env = {
        "SCALEAHEAD_WEBHOOK__ENABLED": "true",
        "SCALEAHEAD_WEBHOOK__HOST": "127.0.0.1",
        "SCALEAHEAD_WEBHOOK__PORT": "0",
        "SCALEAHEAD_WEBHOOK__CERT_FILE": str(certs / "tls.crt"),
        "SCALEAHEAD_WEBHOOK__KEY_FILE": str(certs / "tls.key"),
    }
    return Settings.from_env(env | {f"SCALEAHEAD_WEBHOOK__{k.upper()}": v for k, v in extra.items()})


class Clock:
    def now(self) -> float:
        return NOW


def test_the_daemon_requires_the_client_certificate_and_serves_nothing_until_its_ca_is_there(
    store, certs, client, tmp_path, caplog, refusals
):
    from scaleahead.commands.run import _serve_steering

    ca = tmp_path / "client-ca" / "ca.crt"  # the ConfigMap's volume, not created yet
    store.add_steer("default", "ReplicaSet", RS, "old", "n2", NOW, TTL)
    with caplog.at_level(logging.ERROR, logger="scaleahead.run"):
        pending = _serve_steering(settings(certs, client_ca_file=str(ca)), store, Clock(), retry_s=3600)
    try:
        # Never served without the CA it was told to require (it would answer anyone).
        assert pending.server is None and not pending.try_start()
        assert any("not served yet" in r.getMessage() and str(ca) in r.getMessage() for r in caplog.records)
        ca.parent.mkdir()
        shutil.copy(client / "client-ca.crt", ca)
        assert pending.try_start()
        port = pending.server.server_address[1]
        refused(port, certs, uid="forged")
        refusals.wait()
        assert [s.state for s in store.steers()] == ["pending"]
        answer = post(port, certs, cert=apiserver(client), uid="real")
    finally:
        pending.shutdown()
    assert answer["response"]["allowed"] is True
    assert STEERED_TO.split("/")[1] in base64.b64decode(answer["response"]["patch"]).decode()
    assert [s.state for s in store.steers()] == ["consumed"]


def test_a_client_name_without_a_client_ca_is_a_settings_error(certs):
    from scaleahead.errors import ConfigError

    with pytest.raises(ConfigError, match="SCALEAHEAD_WEBHOOK__CLIENT_NAME: client_name .* client_ca_file"):
        settings(certs, client_name="front-proxy-client")


def test_every_refused_client_is_counted_and_the_warning_is_limited_to_one_a_minute(store, certs, client, refusals):
    """Until 2026-12-06 each refused connection was one warning (one per pod created, with a wrong
    CA) and no metric: reviews fell to zero instead of errors rising, so no alert could fire."""
    counted = threading.Semaphore(0)
    webhook = SteeringWebhook(store, lambda: NOW)
    server = serve_webhook(
        webhook,
        "127.0.0.1",
        0,
        str(certs / "tls.crt"),
        str(certs / "tls.key"),
        client_ca_file=str(client / "client-ca.crt"),
        on_refused=counted.release,
    )
    clock = [100.0]
    server.monotonic = lambda: clock[0]
    port = server.server_address[1]

    def refuse(n: int) -> None:
        for i in range(n):
            refused(port, certs, uid=f"forged-{i}")
            assert counted.acquire(timeout=10), "the refusal was counted"

    try:
        refuse(5)
        assert len(refusals.records) == 1, [r.getMessage() for r in refusals.records]
        clock[0] += 59.0
        refuse(1)
        assert len(refusals.records) == 1
        clock[0] += 2.0  # a minute after the first warning
        refuse(1)
    finally:
        server.shutdown()
        server.server_close()
    assert len(refusals.records) == 2
    assert "5 more refused since the last such warning" in refusals.records[1].getMessage()
    assert refusals.records[1].refused_since_last == 5
    assert webhook.counts == {"steered": 0, "passed": 0, "errors": 0}
