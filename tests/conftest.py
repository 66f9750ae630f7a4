"""Shared fixtures: real SQLite and a real PostgreSQL server, and the shared traces.

PostgreSQL is Debian's package (installed by ``make test``); the fixture runs ``initdb`` and
``pg_ctl`` in a temporary folder on a free loopback port, as the ``postgres`` user when run as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PG_BIN = Path(os.environ.get("SCALEAHEAD_PG_BIN", "/usr/lib/postgresql/15/bin"))
REPO = Path(__file__).resolve().parent.parent

os.environ.setdefault("SCALEAHEAD_TRACES", str(REPO.parent / "shared" / "data" / "traces"))


def as_typed_at_a_terminal() -> None:
    """``preexec_fn`` for a command a test sends Ctrl-C: SIGINT handled and not blocked, as a command
    typed at a terminal has it. Where the tests run as a background job (a CI runner, ``make test &``)
    the shell ignores SIGINT for them, a runner may block it, and a child inherits both."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def ctrl_c(proc: subprocess.Popen[str], seen: str) -> tuple[int, str, str]:
    """Send Ctrl-C (SIGINT) to ``proc`` (started with ``as_typed_at_a_terminal``, its stderr read
    up to ``seen``) and wait for it: its exit code, ``seen`` plus the rest of its stderr, and each of
    its threads' SIGINT masks as they were when it was sent (``signal_state``: what to print when
    the code is wrong). Still running 120 s after: killed, and the test fails with all three."""
    import signal

    state = signal_state(proc.pid)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"still running 120 s after Ctrl-C:\n{seen}{err}\n{state}")
    return proc.returncode, seen + err, state


def write_kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig at ``path`` for the API emulator at ``url`` (no credentials)."""
    import yaml

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url.rstrip("/")}}],
        "users": [{"name": "emu", "user": {}}],
        "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu"}}],
        "current-context": "emu",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in this process for the test (``as_typed_at_a_terminal``
    for a test that sends it to itself); the handler and the mask are restored after it."""
    import signal

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)


def signal_state(pid: int) -> str:
    """The SIGINT bit of each thread's blocked, ignored and caught masks (``/proc``): what a test
    that sent Ctrl-C prints when the command did not stop."""
    bit = 1 << (2 - 1)
    out = []
    for status in sorted(Path(f"/proc/{pid}/task").glob("*/status")):
        with contextlib.suppress(OSError):
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            masks = {k: bool(int(fields[k], 16) & bit) for k in ("SigBlk", "SigIgn", "SigCgt") if k in fields}
            out.append(f"{status.parent.name} {fields.get('Name', '?').strip()} SIGINT {masks}")
    return "\n".join(out) or f"no /proc/{pid}/task"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{c}'" for c in cmd)]
    return cmd


class PostgresServer:
    """The throw-away PostgreSQL server of the session: its URL, and ``stop``/``start`` for the tests
    of a database that goes away (``pg_ctl stop -m immediate``: a crash or a lost server) and comes back."""

    def __init__(self, base: Path, port: int) -> None:
        self.base, self.data, self.port = base, base / "data", port
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args]), check=True, capture_output=True
        )

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1"
        self._pg_ctl("-o", opts, "-l", str(self.base / "log"), "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        self._pg_ctl("-m", mode, "-w", "stop")

    def running(self) -> bool:
        status = _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "status"])
        return subprocess.run(status, capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL server (``PostgresServer``), for the session."""
    if not (PG_BIN / "initdb").exists():
        pytest.fail(f"PostgreSQL is not installed ({PG_BIN}/initdb missing): run `make test`, which installs it.")
    base = Path("/tmp") / f"scaleahead-pg-{os.getpid()}"
    shutil.rmtree(base, ignore_errors=True)
    data = base / "data"
    data.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(data, "postgres")
    subprocess.run(
        _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        check=True,
        capture_output=True,
    )
    server = PostgresServer(base, free_port())
    server.start()
    try:
        yield server
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]), capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """A throw-away PostgreSQL server; a SQLAlchemy URL to an empty database."""
    return postgres_server.url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on SQLite and on PostgreSQL (a fresh database each time)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    import psycopg

    server = request.getfixturevalue("postgres_url")
    name = f"t{int(time.time() * 1e6) % 10**12}"
    admin = server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Cli:
    """Runs ``scaleahead ARGS`` in this process: exit code, stdout, stderr on one line."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch, self.capsys = monkeypatch, capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        from scaleahead.cli import main

        self.monkeypatch.setattr(sys, "argv", ["scaleahead", *args])
        code: Any = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        out = self.capsys.readouterr()
        return int(code or 0), out.out, " ".join(out.err.split())


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``scaleahead`` run in this process (``Cli``)."""
    return Cli(monkeypatch, capsys)


def fail_once(engine: Any, statement_prefix: str, message: str) -> None:
    """Make the next SQL statement of ``engine`` that starts with ``statement_prefix`` raise an
    ``OperationalError`` (``message``), once: a transient database failure in the middle of a write."""
    from sqlalchemy import event
    from sqlalchemy.exc import OperationalError

    armed = [True]

    @event.listens_for(engine, "before_cursor_execute")
    def _once(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if armed[0] and statement.startswith(statement_prefix):
            armed[0] = False
            raise OperationalError(statement, params, Exception(message))


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback server that accepts connections and never answers (a hung Prometheus): yields
    its port and the connections it holds; closes them all at the end."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), held
    finally:
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
