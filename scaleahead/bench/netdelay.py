"""A TCP proxy that adds a fixed round-trip time, for ``bench control-plane --db-latency-ms``.

Run as ``python -m scaleahead.bench.netdelay '{"host": H, "port": P, "rtt_s": R}'``: it listens
on a free port of 127.0.0.1, prints ``{"port": N}`` on one line and forwards each connection to
``H:P``, every chunk of bytes held ``R / 2`` seconds in each direction, so that a request and its
answer take ``R`` longer, as with a database on another machine. Bytes keep their order, and
chunks sent back to back stay back to back (a pipelined client pays ``R`` once, not once a
statement): each chunk is stamped when it is read and sent when its time comes. It stops when
its stdin closes (the bench's process went) or on SIGTERM.

Threads, not asyncio: an event loop's timers wake on whole milliseconds (epoll), which would
turn 0.5 ms into 1 ms or more each way; a thread's sleep is precise to tens of microseconds. A
process of its own, so that its work does not hold the bench's interpreter lock.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import socket
import sys
import threading
import time

CHUNK = 65536


def _pipe(src: socket.socket, dst: socket.socket, delay_s: float) -> None:
    """Copy ``src`` to ``dst``, each chunk sent ``delay_s`` after it was read; then shut ``dst``'s
    sending side."""
    held: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def send() -> None:
        try:
            while True:
                due, data = held.get()
                if not data:  # end of stream
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        while True:
            data = src.recv(CHUNK)
            held.put((time.monotonic() + delay_s, data))
            if not data:
                break
    except OSError:
        held.put((0.0, b""))
    sender.join()


def _connection(client: socket.socket, host: str, port: int, half_s: float) -> None:
    try:
        server = socket.create_connection((host, port))
    except OSError:
        client.close()
        return
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pipe, args=(server, client, half_s), daemon=True)
    back.start()
    _pipe(client, server, half_s)
    back.join()
    client.close()
    server.close()


def serve(listener: socket.socket, host: str, port: int, rtt_s: float) -> None:
    """Accept on ``listener`` until it is closed; each connection forwarded by its own threads."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_connection, args=(client, host, port, rtt_s / 2.0), daemon=True).start()


def listen() -> socket.socket:
    """A listening socket on a free port of 127.0.0.1."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    return listener


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    listener = listen()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())

    def watch_stdin() -> None:  # the parent went: stop too
        sys.stdin.buffer.read()
        stopped.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    args = (listener, str(spec["host"]), int(spec["port"]), float(spec["rtt_s"]))
    threading.Thread(target=serve, args=args, daemon=True).start()
    print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
    stopped.wait()
    listener.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run by the bench as a child process
    sys.exit(main(sys.argv[1:]))
