"""Writers at once on one real SQLite file or PostgreSQL database: processes migrating the schema
together (two replicas and the retraining CronJob starting after an upgrade), and promotions in
one model family racing each other (an operator's rollback and the daemon's rollout)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from storage import Store

#: Each process imports the store, then sleeps until a common start time, so that all of them open
#: the database within milliseconds of each other.
OPEN_AT = """
import sys, time
from storage import Store
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
Store(sys.argv[1]).close()
"""


@pytest.mark.parametrize("start", ["empty", "0008_original"])
def test_processes_opening_a_database_together_migrate_it_once_and_all_start(db_url: str, start: str) -> None:
    """The first migrates; the others wait for it (PostgreSQL: an advisory lock; SQLite: the write
    lock taken up front), then find the schema at head and do nothing. The second used to fail
    with a raw IntegrityError (PostgreSQL) or "database is locked" (SQLite)."""
    if start != "empty":
        old = Store(db_url, upgrade=False)
        old.upgrade(start)
        old.create_rollout("default", "shadow", "1", "2", 5.0)
        old.close()
    at = time.time() + 4.0  # after every interpreter has imported sqlalchemy and alembic
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT, db_url, str(at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert [code for code, _ in results] == [0, 0, 0], [err[-600:] for _, err in results]
    store = Store(db_url, upgrade=False)
    assert store.current_revision() == Store.head_revision()
    assert len(store.rollouts()) == (0 if start == "empty" else 1)
    store.close()
