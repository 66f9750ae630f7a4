"""Rolling the schema back: `scaleahead db downgrade --revision REV`, run by the newer scaleahead (the
one that knows the database's revision), on real SQLite and PostgreSQL. Until 2026-12-06 the only way
was ``Store.downgrade`` from Python, and docs/operations.md sent readers to the previous image, which
cannot downgrade from a revision it does not know (a raw Alembic traceback)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text

from scaleahead.errors import UserError
from storage import Store
from tests.conftest import Cli


def test_db_downgrade_goes_back_to_the_previous_head_and_keeps_the_rows(db_url: str, cli: Cli) -> None:
    store = Store(db_url)
    rollout = store.create_rollout("default", "shadow", "1", "2", 5.0)
    store.close()
    head = Store.head_revision()
    code, out, err = cli("db", "downgrade", "--db", db_url, "--revision", "0009_one_running")
    # nothing on stderr but Alembic's info lines, there when an earlier test of the same process
    # configured logging (the full suite)
    assert (
        code == 0 and not re.sub(r'\{"time": "[^"]*", "level": "info", "logger": "alembic[^}]*\}', "", err).strip()
    ), err
    assert f"{head} -> 0009_one_running" in " ".join(out.split())  # the console wraps long URLs
    store = Store(db_url, upgrade=False)
    assert store.current_revision() == "0009_one_running"
    assert [r.id for r in store.rollouts()] == [rollout]
    # a command that only reads (or changes rows) does not migrate it back up, as it did silently
    # until 2026-12-07 (an operator audit): the older image would then refuse the database
    for argv in (["models", "list"], ["rollout", "status"], ["actuator", "journal"], ["steers"]):
        code, out, err = cli(*argv, "--db", db_url)
        assert code == 2, (argv, out, err)
        assert "is at schema revision 0009_one_running, older than this scaleahead's" in err, (argv, err)
        assert "Run `scaleahead db upgrade --db" in err
    assert store.current_revision() == "0009_one_running"
    # again: already there, nothing to do (a rollback script may run it twice)
    code, out, _ = cli("db", "downgrade", "--db", db_url, "--revision", "0009_one_running")
    assert code == 0 and "already at 0009_one_running; nothing to do" in " ".join(out.split())
    # the newer scaleahead starts again on it: migrated forward on open, rows kept
    store = Store(db_url)
    assert store.current_revision() == head
    assert [r.id for r in store.rollouts()] == [rollout]
    store.close()


def test_db_downgrade_refuses_an_unknown_revision_listing_the_known_ones(db_url: str, cli: Cli) -> None:
    Store(db_url).close()
    code, _, err = cli("db", "downgrade", "--db", db_url, "--revision", "0011_future")
    assert code == 2
    assert "Unknown schema revision '0011_future'" in err
    assert ", ".join(Store.revisions()) in err
    assert "Traceback" not in err
    assert Store(db_url, upgrade=False).current_revision() == Store.head_revision()


def test_db_downgrade_to_a_revision_newer_than_the_database_says_there_is_nothing_to_do(db_url: str, cli: Cli) -> None:
    old = Store(db_url, upgrade=False)
    old.upgrade("0008_original")
    old.close()
    code, _, err = cli("db", "downgrade", "--db", db_url, "--revision", "0009_one_running")
    assert code == 2
    assert "is at schema revision '0008_original', older than '0009_one_running'" in err
    assert "nothing to downgrade, and nothing was changed" in err
    assert Store(db_url, upgrade=False).current_revision() == "0008_original"


def test_db_downgrade_creates_no_database(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "none.db"
    code, _, err = cli("db", "downgrade", "--db", f"sqlite:///{path}", "--revision", "0009_one_running")
    assert code == 2 and "No scaleahead database" in err
    assert not path.exists()


def test_a_database_newer_than_the_code_says_how_to_roll_back(db_url: str) -> None:
    """The refusal of an unknown (newer) revision names the downgrade to this code's head: in a
    rollback, "upgrade scaleahead" alone pointed the wrong way."""
    store = Store(db_url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    store.close()
    with pytest.raises(UserError) as refused:
        Store(db_url)
    head = Store.head_revision()
    assert f"scaleahead db downgrade --revision {head}" in refused.value.message
    assert "restore the backup" in refused.value.message
