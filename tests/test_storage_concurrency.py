"""Writers at once on one real SQLite file or PostgreSQL database: processes migrating the schema
together (two replicas and the retraining CronJob starting after an upgrade), and promotions in
one model family racing each other (an operator's rollback and the daemon's rollout)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable

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


def _family(store: Store) -> tuple[int, int, int]:
    """Version ``a``, the champion of ``lstm``, and ``b`` and ``c``, two candidates of the family."""
    a = store.register_model("a", "lstm")
    store.make_champion(a, now=1.0)
    return a, store.register_model("b", "lstm"), store.register_model("c", "lstm")


def _while_promoting(store: Store, model_id: int, other: Callable[[], object]) -> object:
    """Run ``other`` while a promotion of ``model_id`` holds its transaction open for a second
    (what Store.make_champion does, with its commit delayed); returns what ``other`` returned."""
    started, got = threading.Event(), []

    def promote() -> None:
        with store.session() as s:
            Store._make_champion(s, model_id, 2.0)
            started.set()
            time.sleep(1.0)

    def then() -> None:
        started.wait(30)
        try:
            got.append(other())
        except Exception as exc:  # handed to the test
            got.append(exc)

    threads = [threading.Thread(target=promote), threading.Thread(target=then)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return got[0]


def test_two_promotions_at_once_in_one_family_leave_one_champion_the_one_promoted_last(db_url: str) -> None:
    """An operator's `models promote` racing another promotion in the family: the second waits for
    the first to commit, then retires its champion. Both used to commit, leaving two champions."""
    store = Store(db_url)
    a, b, c = _family(store)
    retired = _while_promoting(store, b, lambda: store.make_champion(c, now=3.0))
    assert retired == [b]
    assert {m.id: m.status for m in store.models()} == {a: "retired", b: "retired", c: "champion"}
    assert store.model(b).metrics["retired_at"] == 3.0
    store.close()


def test_a_rollout_promoted_while_a_version_of_its_family_is_promoted_leaves_one_champion(db_url: str) -> None:
    """The daemon's promote_rollout racing an operator's rollback: the same serialization."""
    store = Store(db_url)
    a, b, c = _family(store)
    rid = store.create_rollout("default", "canary", str(a), str(c), now=1.0, share=0.5)
    seen = store.rollout(rid)
    _while_promoting(store, b, lambda: store.promote_rollout(seen, 3.0, challenger_model=c, champion_model=a))
    assert {m.id: m.status for m in store.models()} == {a: "retired", b: "retired", c: "champion"}
    assert store.rollout(rid).state == "promoted"
    store.close()


def test_a_second_champion_is_refused_by_the_database_as_a_clear_error(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that does not wait for the family's lock (here: the lock switched off) cannot leave
    two champions either: the one-champion index refuses the second, which is a ChampionChanged
    (a UserError: one paragraph in the CLI), with nothing recorded, not a raw IntegrityError."""
    from storage.store import ChampionChanged

    store = Store(db_url)
    a, b, c = _family(store)
    monkeypatch.setattr(Store, "_lock_family", staticmethod(lambda s, model_id, family: None))
    refused = _while_promoting(store, b, lambda: store.make_champion(c, now=3.0))
    assert isinstance(refused, ChampionChanged), refused
    assert f"Model version {c} was not made the champion of 'lstm'" in refused.message
    assert "nothing was recorded" in refused.message
    assert {m.id: m.status for m in store.models()} == {a: "retired", b: "champion", c: "candidate"}
    store.close()
