"""Retention of model checkpoints and pod steers (``Store.prune_model_checkpoints``,
``Store.prune_steers``), on SQLite and PostgreSQL: what a rollback or a running rollout may still
need is never pruned, and a pruned version says so when someone tries to load or promote it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import update

from scaleahead.commands.forecasting import _promotable_checkpoint
from scaleahead.errors import DataError, UserError
from scaleahead.retraining import load_model_version
from storage import Store
from storage.schema import ModelVersionRow

FIXTURE = Path(__file__).parent / "forecaster" / "fixtures" / "lstm_v2_60s.pt"
DAY = 86400.0


def _age(store: Store, model_id: int, days: float) -> None:
    with store.session() as s:
        when = datetime.fromtimestamp(time.time() - days * DAY, UTC)
        s.execute(update(ModelVersionRow).where(ModelVersionRow.id == model_id).values(created_at=when))


def test_former_champions_are_ranked_and_aged_by_when_they_were_retired(db_url: str) -> None:
    """A champion that served for months and was replaced yesterday is the rollback target: kept,
    though registered long ago; one retired two months ago is not, though registered after it."""
    store = Store(db_url)
    data = FIXTURE.read_bytes()
    now = time.time()
    long_served = store.register_model("long-served", "lstm", artifact=data, created_at=now - 100 * DAY)
    short_lived = store.register_model("short-lived", "lstm", artifact=data, created_at=now - 70 * DAY)
    store.make_champion(short_lived, now=now - 69 * DAY)
    store.make_champion(long_served, now=now - 60 * DAY)  # a rollback: short_lived retires 60 days ago
    newest = store.register_model("newest", "lstm", artifact=data, created_at=now - 1 * DAY)
    store.make_champion(newest, now=now - 1 * DAY)  # long_served retires yesterday
    assert store.model(long_served).metrics["retired_at"] == now - 1 * DAY
    assert store.model(short_lived).metrics["retired_at"] == now - 60 * DAY

    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=1, now=now) == [short_lived]
    # Within the retention period a former champion is kept even beyond keep_retired.
    assert store.prune_model_checkpoints(now - 90 * DAY, keep_retired=0, now=now) == []
    assert store.prune_model_checkpoints(now - 0.5 * DAY, keep_retired=0, now=now) == [long_served]


def test_registration_time_is_the_callers_clock(db_url: str) -> None:
    """`run --virtual` registers retrained versions on its virtual clock and prunes on it."""
    store = Store(db_url)
    data = FIXTURE.read_bytes()
    virtual_now = datetime(2001, 6, 1, tzinfo=UTC).timestamp()
    old = store.register_model("old", "lstm", status="challenger", artifact=data, created_at=virtual_now - 40 * DAY)
    recent = store.register_model("recent", "lstm", status="challenger", artifact=data, created_at=virtual_now - DAY)
    assert store.model(old).created_at.timestamp() == virtual_now - 40 * DAY
    assert store.prune_model_checkpoints(virtual_now - 30 * DAY, keep_retired=3, now=virtual_now) == [old]
    assert recent in store.models_with_artifacts()


def test_only_checkpoints_no_one_can_need_are_pruned(db_url: str) -> None:
    store = Store(db_url)
    data = FIXTURE.read_bytes()

    def version(name: str, status: str, days: float, family: str = "lstm") -> int:
        mid = store.register_model(name, family, status=status, artifact=data, artifact_path="/gone/x.pt")
        _age(store, mid, days)
        return mid

    champion = version("champion", "champion", 200)
    retired = [version(f"retired-{i}", "retired", 100 - i) for i in range(5)]  # newest last
    lost = [version(f"lost-{i}", "challenger", 40 + i) for i in range(3)]
    on_trial = version("on-trial", "challenger", 45)
    fresh = version("fresh", "challenger", 2)
    other_family_retired = version("clock-retired", "retired", 90, family="lstm_clock")
    no_checkpoint = store.register_model("ridge", "ridge", status="challenger")
    _age(store, no_checkpoint, 60)
    done = store.create_rollout("default", "canary", str(champion), str(lost[0]), time.time())
    store.update_rollout(store.rollout(done), time.time(), state="rolled_back")
    store.create_rollout("default", "canary", str(champion), str(on_trial), time.time())

    now = time.time()
    pruned = store.prune_model_checkpoints(now - 30 * DAY, keep_retired=3, now=now)

    # The two oldest former champions (beyond the newest 3) and the challengers that lost.
    assert pruned == sorted([retired[0], retired[1], *lost])
    assert store.models_with_artifacts() == {
        champion,
        retired[2],
        retired[3],
        retired[4],
        on_trial,
        fresh,
        other_family_retired,
    }
    for mid in pruned:
        assert store.model(mid).metrics["checkpoint_pruned_at"] == now
        assert store.model_artifact(mid) is None
    assert store.model(champion).pruned_note == ""
    # What the caller runs is kept too.
    extra = version("running-here", "challenger", 50)
    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=3, now=now, in_use=[extra]) == []
    # Nothing left to prune: a second run is a no-op.
    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=3, now=now) == [extra]

    # A pruned version says so when loaded (the daemon) or promoted (a rollback).
    day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
    with pytest.raises(DataError, match=f"no checkpoint \\(its checkpoint was pruned on {day}"):
        load_model_version(store, retired[0], 60.0, [])
    with pytest.raises(UserError, match="pruned on"):
        _promotable_checkpoint(store, store.model(retired[0]))
    # The kept ones still load.
    assert load_model_version(store, retired[4], 60.0, []).name.startswith("lstm")
    store.close()


def test_keep_zero_retired_prunes_every_old_former_champion(db_url: str) -> None:
    store = Store(db_url)
    data = FIXTURE.read_bytes()
    old = store.register_model("old", "lstm", status="retired", artifact=data)
    _age(store, old, 31)
    young = store.register_model("young", "lstm", status="retired", artifact=data)
    _age(store, young, 29)
    now = time.time()
    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=0, now=now) == [old]
    assert store.models_with_artifacts() == {young}
    store.close()


def test_finished_steers_are_pruned_and_pending_ones_kept(db_url: str) -> None:
    store = Store(db_url)
    t = 1_000_000.0
    consumed = store.add_steer("shop", "ReplicaSet", "web", "web-1", "node-2", t, 60)
    assert store.consume_steer("shop", "ReplicaSet", "web", "web-9", t + 5) is not None
    cancelled = store.add_steer("shop", "ReplicaSet", "api", "api-1", "node-3", t, 60)
    store.set_steer_state(cancelled, "cancelled", t + 1)
    store.add_steer("shop", "ReplicaSet", "db", "db-1", "node-4", t, 60)  # expires at t + 60
    assert [s.id for s in store.expire_steers(t + 61)] == [3]
    pending = store.add_steer("shop", "ReplicaSet", "cart", "cart-1", "node-5", t, 3600)
    late = store.add_steer("shop", "ReplicaSet", "auth", "auth-1", "node-6", t + 200, 60)
    store.set_steer_state(late, "cancelled", t + 200)

    assert store.prune_steers(t + 100) == 3  # consumed, cancelled, expired; not the later one
    assert {s.id for s in store.steers()} == {pending, late}
    assert consumed not in {s.id for s in store.steers()}
    store.close()


def test_a_version_whose_file_could_not_be_removed_keeps_its_stored_checkpoint(db_url: str) -> None:
    """``remove_file`` is asked for each version about to lose its checkpoint, before the stored copy
    goes; False keeps that version whole (no ``checkpoint_pruned_at``), to be tried again later."""
    store = Store(db_url)
    now = time.time()
    kept = store.register_model("kept", "lstm", artifact=b"c", artifact_path="/a/kept.ckpt", created_at=now - 40 * DAY)
    gone = store.register_model("gone", "lstm", artifact=b"c", artifact_path="/a/gone.ckpt", created_at=now - 40 * DAY)
    asked: list[tuple[int, str]] = []

    def remove_file(model_id: int, path: str) -> bool:
        asked.append((model_id, path))
        return model_id != kept

    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=3, now=now, remove_file=remove_file) == [gone]
    assert sorted(asked) == [(kept, "/a/kept.ckpt"), (gone, "/a/gone.ckpt")]
    assert store.models_with_artifacts() == {kept}
    assert "checkpoint_pruned_at" not in store.model(kept).metrics
    assert store.model(gone).metrics["checkpoint_pruned_at"] == now
    assert store.prune_model_checkpoints(now - 30 * DAY, keep_retired=3, now=now, remove_file=lambda *_: True) == [kept]
