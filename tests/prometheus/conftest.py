"""A real Prometheus over a TSDB backfilled (with promtool) from a slice of the nasa-10s trace.

The server starts once per session on a free loopback port. What it holds (``Backfilled``; each
value is the point at its own time: ``web.values[i]`` is at ``web.start + i * 10``; the control
loop reads the point at ``T`` as the step ``[T - 10, T)``, ``history.as_steps``):

- ``nasa_requests{workload="web"}``: 2 days of nasa-10s (1995-08-11 to 08-13), whose first 8 hours
  are the trace's real outage (missing data);
- ``nasa_requests{workload="wNN"}`` for NN = 01..08: 6 hours of nasa-10s after the outage, series
  NN shifted by NN hours, with a few points deliberately removed (short gaps);
- ``nasa_requests_total{workload="web"}``: the running total of the web series (a counter) that
  resets to zero half-way through.

Helpers: an HTTP proxy on loopback that checks credentials, delays or fails requests and records
the headers it saw; a policy factory.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scaleahead.policy import Policy, parse_policies
from scaleahead.prometheus.backfill import LocalPrometheus, create_blocks, write_openmetrics
from scaleahead.traces import load_series
from scaleahead.types import Series

WEB_SPAN = 17280  # 2 days at 10 s
W_SPAN = 2160  # 6 hours
W_GAPS = (100, 101, 102, 1000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Backfilled:
    url: str
    server: LocalPrometheus
    tsdb: Path
    web: Series
    workers: dict[str, Series]
    counter: Series
    reset_index: int

    @property
    def end(self) -> float:
        """Just after the web series' last point."""
        return self.web.end


def _nasa_slices() -> tuple[Series, dict[str, Series], Series, int]:
    s = load_series("nasa-10s")
    nan = np.isnan(s.values)
    edges = np.diff(np.r_[0, nan.astype(np.int8), 0])
    outage_end = int(np.flatnonzero(edges == -1)[-1])  # the end of the trace's last outage
    i0 = outage_end - 2880  # start 8 hours inside the outage
    web = Series("web", s.start + i0 * 10.0, 10.0, s.values[i0 : i0 + WEB_SPAN].copy())
    assert np.isnan(web.values[:2880]).all() and np.isfinite(web.values[2880:]).all()
    workers = {}
    w_start = s.start + outage_end * 10.0
    for k in range(1, 9):
        j = outage_end + k * 360
        vals = s.values[j : j + W_SPAN].copy()
        vals[list(W_GAPS)] = np.nan
        workers[f"w{k:02d}"] = Series(f"w{k:02d}", w_start, 10.0, vals)
    finite = np.nan_to_num(web.values)
    reset = WEB_SPAN // 2 + 1234
    total = np.cumsum(finite)
    total[reset:] -= total[reset - 1]
    counter = Series("web_total", web.start, 10.0, np.where(np.isnan(web.values), np.nan, total))
    return web, workers, counter, reset


@pytest.fixture(scope="session")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.fail("Debian's prometheus package is not installed: run `make test`, which installs it.")
    web, workers, counter, reset = _nasa_slices()
    base = tmp_path_factory.mktemp("prom")
    om = base / "nasa.om"

    def at_own_times(s: Series) -> Series:
        # write_openmetrics stamps a step at its end; the tests want each value at the slice's own
        # time (``web.values[i]`` is the point at ``web.start + i * 10``), so the steps end there.
        return Series(s.name, s.start - s.step_s, s.step_s, s.values, s.unit)

    with om.open("w") as out:
        write_openmetrics(
            out,
            "nasa_requests",
            [
                ({"workload": "web"}, at_own_times(web)),
                *(({"workload": k}, at_own_times(v)) for k, v in workers.items()),
            ],
            eof=False,
        )
        write_openmetrics(out, "nasa_requests_total", [({"workload": "web"}, at_own_times(counter))])
    tsdb = base / "tsdb"
    create_blocks(om, tsdb, "24h")
    server = LocalPrometheus(tsdb, free_port(), lookback_s=5.0).start()
    try:
        yield Backfilled(server.url, server, tsdb, web, workers, counter, reset)
    finally:
        server.stop()


def policy(name: str, query: str, step: float = 10.0) -> Policy:
    text = (
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n"
        f"  target: {{name: {name}}}\n"
        "  capacityPerReplica: 10\n"
        f"  demand: {{query: '{query}', stepSeconds: {step}}}\n"
    )
    return parse_policies(text, "<test>")[0]


@dataclass
class ProxyState:
    upstream: str
    require_auth: str | None = None
    delay_s: float = 0.0
    fail_first: int = 0
    fail_status: int = 503
    #: A request whose (decoded) body contains this text waits ``slow_delay_s`` (one slow query).
    slow_marker: str | None = None
    slow_delay_s: float = 0.0
    #: Added to each JSON answer's "warnings" (as Thanos does for a partial answer).
    warning: str | None = None
    #: Applied to each JSON answer (a broken proxy, a native histogram): the decoded document in, out.
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    seen: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ProxyState

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        st = self.server.state  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with st.lock:
            st.seen.append({k.lower(): v for k, v in self.headers.items()})
            failing = st.fail_first > 0
            if failing:
                st.fail_first -= 1
        if st.require_auth is not None and self.headers.get("Authorization") != st.require_auth:
            self._reply(401, b'{"status":"error","errorType":"unauthorized","error":"bad credentials"}')
            return
        if failing:
            self._reply(st.fail_status, b"upstream overloaded")
            return
        if st.delay_s:
            time.sleep(st.delay_s)
        if st.slow_marker and body and st.slow_marker in urllib.parse.unquote_plus(body.decode()):
            time.sleep(st.slow_delay_s)
        req = urllib.request.Request(st.upstream + self.path, data=body, method=self.command)
        for k in ("Content-Type", "Accept-Encoding", "Accept"):
            if self.headers.get(k):
                req.add_header(k, self.headers[k])
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                answer = resp.read()
                if (st.warning is not None or st.rewrite is not None) and not resp.headers.get("Content-Encoding"):
                    doc = json.loads(answer)
                    if st.warning is not None:
                        doc["warnings"] = [*doc.get("warnings", []), st.warning]
                    if st.rewrite is not None:
                        doc = st.rewrite(doc)
                    answer = json.dumps(doc).encode()
                self._reply(resp.status, answer, resp.headers.get("Content-Encoding"))
        except urllib.error.HTTPError as exc:
            self._reply(exc.code, exc.read())

    def _reply(self, status: int, body: bytes, encoding: str | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = _serve
    do_POST = _serve


@dataclass
class Proxy:
    url: str
    state: ProxyState


def start_proxy(upstream: str, tls: ssl.SSLContext | None = None) -> tuple[Proxy, http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.state = ProxyState(upstream)  # type: ignore[attr-defined]
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "https" if tls is not None else "http"
    return Proxy(f"{scheme}://127.0.0.1:{server.server_address[1]}", server.state), server  # type: ignore[attr-defined]


@pytest.fixture
def proxy(prom: Backfilled) -> Iterator[Proxy]:
    """An HTTP proxy to the test Prometheus that can check credentials, delay and fail."""
    p, server = start_proxy(prom.url)
    try:
        yield p
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A throw-away CA, a server certificate for 127.0.0.1 and a client certificate (openssl)."""
    d = tmp_path_factory.mktemp("certs")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=scaleahead test CA",
    )
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
        )
        (d / f"{name}.ext").write_text(ext + "\n")
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
        )
    return Certs(d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key")


@pytest.fixture
def make_policy() -> object:
    """``make_policy(name, query, step=10.0)`` -> a Policy whose demand is that PromQL."""
    return policy


@pytest.fixture
def tls_proxy(prom: Backfilled, certs: Certs) -> Iterator[Proxy]:
    """An HTTPS proxy to the test Prometheus that requires a client certificate signed by the CA."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server_cert, certs.server_key)
    ctx.load_verify_locations(certs.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    p, server = start_proxy(prom.url, ctx)
    try:
        yield p
    finally:
        server.shutdown()
        server.server_close()
