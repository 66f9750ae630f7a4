"""The metrics endpoint and the webhook listen on IPv6 when ``server.host`` / ``webhook.host`` is
an IPv6 address (until 2026-12-07 ``::`` was refused: ``http.server`` listens on IPv4 only)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from actuator.steering import WEBHOOK_PATH, SteeringWebhook, serve_webhook
from scaleahead.clock import VirtualClock
from scaleahead.listen import listen_family, listen_host
from scaleahead.observability import Health, Metrics, serve
from storage import Store


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")


def test_the_family_follows_the_host() -> None:
    assert listen_family("0.0.0.0") == socket.AF_INET  # noqa: S104 - the default, listened on by name
    assert listen_family("127.0.0.1") == socket.AF_INET
    assert listen_family("::") == socket.AF_INET6
    assert listen_family("[::1]") == socket.AF_INET6
    assert listen_family("fd00::1") == socket.AF_INET6
    assert listen_family("no-such-host.invalid") == socket.AF_INET  # binding says what is wrong
    assert listen_host("[::1]") == "::1" and listen_host("::") == "::" and listen_host("0.0.0.0") == "0.0.0.0"  # noqa: S104


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - a local test server
        return answer.status, answer.read()


@pytest.fixture
def metrics_on() -> Iterator[object]:
    servers: list[object] = []

    def start(host: str) -> int:
        server = serve(Metrics(), Health(60.0, time.time), host, 0)
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for s in servers:
        s.shutdown()  # type: ignore[attr-defined]
        s.server_close()  # type: ignore[attr-defined]


@needs_ipv6
def test_the_metrics_endpoint_is_served_on_an_ipv6_address(metrics_on) -> None:  # type: ignore[no-untyped-def]
    port = metrics_on("::1")
    status, body = _get(f"http://[::1]:{port}/metrics")
    assert status == 200 and b"scaleahead_" in body


@needs_ipv6
def test_the_ipv6_wildcard_also_takes_ipv4_where_the_host_allows(metrics_on) -> None:  # type: ignore[no-untyped-def]
    port = metrics_on("::")
    assert _get(f"http://[::1]:{port}/metrics")[0] == 200
    try:
        v6only = open("/proc/sys/net/ipv6/bindv6only").read().strip() == "1"  # noqa: SIM115, PTH123
    except OSError:
        v6only = False
    if not v6only:  # the socket asks for dual stack; a host that forbids it keeps IPv6 only
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 200


def test_an_ipv4_host_is_still_served_on_ipv4(metrics_on) -> None:  # type: ignore[no-untyped-def]
    port = metrics_on("127.0.0.1")
    assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 200


@needs_ipv6
def test_the_webhook_is_served_on_an_ipv6_address(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp_path / 'steer.db'}")
    server = serve_webhook(SteeringWebhook(store, VirtualClock(1_000_000.0)), "::1", 0)
    try:
        port = server.server_address[1]
        request = urllib.request.Request(  # noqa: S310 - a local test server
            f"http://[::1]:{port}{WEBHOOK_PATH}", data=b"{}", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
            review = json.loads(answer.read())
        assert answer.status == 200 and review["kind"] == "AdmissionReview"
    finally:
        server.shutdown()
        server.server_close()
        store.close()
