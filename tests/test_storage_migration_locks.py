"""A schema migration on a real PostgreSQL while another session holds a lock on a table it alters
(an old replica mid-transaction during a rolling upgrade, an idle-in-transaction psql).

Until 2026-12-06 the migration waited silently and without limit, and its queued ACCESS EXCLUSIVE
lock held up every new reader of that table (the old replica's next cycle) meanwhile. Now each try
waits at most ``storage.migration_lock_timeout_s`` and is rolled back (the readers go on), is logged
with the sessions that hold the locks, and after the last try the start fails with a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import storage
from storage import Store
from tests.conftest import Cli

#: The code under test (a subprocess imports the same one).
CODE = Path(storage.__file__).resolve().parent.parent

TIMEOUT_S = 0.5


@pytest.fixture
def pg_db(postgres_url: str) -> Iterator[str]:
    """A fresh database on the session's PostgreSQL server."""
    name = f"l{int(time.time() * 1e6) % 10**12}"
    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _raw(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _waiting_for_a_lock(admin: psycopg.Connection, proc: subprocess.Popen[str], deadline: float) -> bool:
    """Some session of this database waits for a lock (the migration queued behind the holder),
    while ``proc`` runs."""
    while time.monotonic() < deadline and proc.poll() is None:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        if row and row[0]:
            return True
        time.sleep(0.05)  # polling the server's state, not timing the test
    return False


def test_a_migration_blocked_by_an_open_transaction_fails_clearly_within_its_bound_and_lets_readers_go(
    pg_db: str, cli: Cli
) -> None:
    Store(pg_db).close()
    # the database as the previous version left it (0010 alters forecasts and indexes model_versions)
    assert cli("db", "downgrade", "--db", pg_db, "--revision", "0009_one_running")[0] == 0
    holder = psycopg.connect(_raw(pg_db), application_name="old-replica")
    holder.execute("SELECT count(*) FROM forecasts").fetchone()  # its transaction stays open, idle
    holder_pid = holder.info.backend_pid
    admin = psycopg.connect(_raw(pg_db), autocommit=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(CODE),
        "SCALEAHEAD_STORAGE__MIGRATION_LOCK_TIMEOUT_S": str(TIMEOUT_S),
    }
    started = time.monotonic()
    new = subprocess.Popen(
        [sys.executable, "-P", "-m", "scaleahead.cli", "db", "upgrade", "--db", pg_db],
        env=env,
        cwd=CODE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _waiting_for_a_lock(admin, new, time.monotonic() + 60), "the migration never waited for the lock"
        # the old replica's next cycle reads forecasts while the migration waits: it is let go when
        # the try times out, not held for as long as the holder's transaction lasts
        reader = psycopg.connect(_raw(pg_db), autocommit=True)
        reader.execute("SET statement_timeout = '5s'")
        reader.execute("SELECT count(*) FROM forecasts").fetchone()
        reader.close()
        _, err = new.communicate(timeout=30)
    except BaseException:
        holder.rollback()  # on the code before the fix the migration waits for this
        new.kill()
        new.communicate()
        raise
    finally:
        elapsed = time.monotonic() - started
    from storage.store import MIGRATION_LOCK_TRIES  # here: the code before the fix fails above, not on import

    assert new.returncode == 2, err[-2000:]
    assert "Traceback" not in err
    assert elapsed < MIGRATION_LOCK_TRIES * (TIMEOUT_S + 1.0) + 8.0  # tries, pauses, interpreter start
    flat = " ".join(err.split())
    assert "Cannot migrate the schema of" in flat
    assert f"pid {holder_pid} application_name 'old-replica' idle in transaction" in flat
    assert "forecasts" in flat and "End that session" in flat and "stop the old replica" in flat
    assert "Nothing was migrated" in flat
    # each earlier try was logged with the same holder
    assert flat.count(f"pid {holder_pid} application_name 'old-replica'") == MIGRATION_LOCK_TRIES
    assert "trying again (2 of 3)" in flat
    # nothing half-migrated: still the previous revision, no one-champion index
    assert admin.execute("SELECT version_num FROM alembic_version").fetchone() == ("0009_one_running",)
    assert admin.execute(
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'ux_model_versions_one_champion'"
    ).fetchone() == (0,)
    # the holder is still in its transaction, its reads unharmed; once it ends, the next start migrates
    assert holder.execute("SELECT count(*) FROM forecasts").fetchone() == (0,)
    holder.rollback()
    holder.close()
    admin.close()
    store = Store(pg_db)
    assert store.current_revision() == Store.head_revision()
    store.close()
