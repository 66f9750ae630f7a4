"""The delaying TCP proxy of `bench control-plane --db-latency-ms` (scaleahead/bench/netdelay.py):
bytes through it unchanged and in order, each direction held half the round trip, back-to-back
chunks kept back to back (a pipelined client pays the round trip once)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from scaleahead.bench import netdelay
from scaleahead.bench.control_plane import _child


def _echo_server() -> tuple[socket.socket, int]:
    listener = netdelay.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return

            def echo(c: socket.socket = conn) -> None:
                with c:
                    while data := c.recv(65536):
                        c.sendall(data)

            threading.Thread(target=echo, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, int(listener.getsockname()[1])


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = s.recv(n - len(got))
        assert chunk, "the proxy closed the connection early"
        got += chunk
    return bytes(got)


def test_bytes_come_back_unchanged_after_the_round_trip_and_pipelined_chunks_pay_it_once() -> None:
    echo, echo_port = _echo_server()
    # 1 s (was 0.2 s, under a bound of 10 round trips): the bound below, 4 round trips, leaves a loaded
    # machine 3 s over the one round trip the messages take through the child process (was 1.8 s). A
    # proxy that held each message a round trip after the one before would take 20 s, one that held
    # each chunk (at most 64 KiB) half a round trip after the one before at least 16 * 0.5 = 8 s
    # (measured: 9 round trips; the old bound let that through).
    rtt = 1.0
    with _child("scaleahead.bench.netdelay", {"host": "127.0.0.1", "port": echo_port, "rtt_s": rtt}, "proxy", "") as (
        ready,
        pid,
    ):
        assert pid != os.getpid()
        with socket.create_connection(("127.0.0.1", ready["port"])) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = time.monotonic()
            s.sendall(b"ping")
            assert _recv_exactly(s, 4) == b"ping"
            one = time.monotonic() - t0
            # 20 messages sent back to back, 1 MB in all, each of its own bytes: all of them come
            # back in order, and together in well under 20 round trips (each held, not queued)
            messages = [bytes([i]) * 50_000 for i in range(20)]
            t0 = time.monotonic()
            for m in messages:
                s.sendall(m)
            back = _recv_exactly(s, sum(map(len, messages)))
            many = time.monotonic() - t0
    echo.close()
    assert back == b"".join(messages)
    assert one >= rtt  # never shorter than asked
    assert many < 4 * rtt, f"20 back-to-back messages took {many:.2f} s at a {rtt} s round trip"


def test_a_server_not_there_closes_the_connection_and_the_proxy_stops_with_its_parent() -> None:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    spec = json.dumps({"host": "127.0.0.1", "port": 1, "rtt_s": 0.01})  # nothing listens on port 1
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "scaleahead.bench.netdelay", spec],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        port = json.loads(proc.stdout.readline())["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            assert s.recv(10) == b""  # closed at once, not left hanging
        proc.stdin.close()  # the bench's process went
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
