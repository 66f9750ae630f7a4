"""Checkpoints stored with their model version (migration 0005_artifact), on SQLite and PostgreSQL,
and loaded from there by a restarted daemon whose checkpoint file is gone (an emptyDir)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import update

from scaleahead.errors import DataError
from storage import Store
from storage.schema import ModelArtifactRow

FIXTURE = Path(__file__).parent / "forecaster" / "fixtures" / "lstm_v2_60s.pt"


def test_an_existing_database_upgrades_and_stores_checkpoints_checked_by_their_hash(db_url: str) -> None:
    old = Store(db_url, upgrade=False)
    old.upgrade("0004_risk")
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision()
    data = FIXTURE.read_bytes()
    with_bytes = store.register_model("lstm-a", "lstm", artifact_path="/gone/a.pt", artifact=data, status="champion")
    without = store.register_model("ridge-b", "ridge")
    assert store.models_with_artifacts() == {with_bytes}
    assert store.model_artifact(with_bytes) == data and store.model_artifact(without) is None
    assert store.model(with_bytes).artifact_sha256 == hashlib.sha256(data).hexdigest()
    with pytest.raises(ValueError, match="does not match"):
        store.register_model("lstm-c", "lstm", artifact=data, artifact_sha256="0" * 64)
    with store.session() as s:  # a corrupt row is never handed out
        s.execute(update(ModelArtifactRow).values(data=data[:-10]))
    with pytest.raises(DataError, match="does not match its SHA-256"):
        store.model_artifact(with_bytes)
    store.downgrade("0004_risk")
    assert store.current_revision() == "0004_risk"
    store.close()


def test_a_restarted_daemon_loads_the_champion_from_the_database_when_its_file_is_gone(tmp_path: Path) -> None:
    from scaleahead.commands.run import _production_model
    from scaleahead.settings import Settings
    from scaleahead.traces import load_series

    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    history = [load_series("worldcup-1m").between(894000000.0, 894000000.0 + 2 * 86400)]  # 60 s, like the fixture
    gone = store.register_model("lstm-old", "lstm", artifact_path=str(tmp_path / "gone.pt"), status="champion")
    model, mid = _production_model("lstm", store, Settings(), history)
    assert mid is None and model.name != "lstm", "a file that is gone and nothing stored: the fallback"
    kept = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(tmp_path / "gone-too.pt"),
        artifact=FIXTURE.read_bytes(),
        status="champion",
    )
    model, mid = _production_model("lstm", store, Settings(), history)
    assert (mid, model.name) == (kept, "lstm")
    assert gone < kept


def test_models_promote_makes_a_version_champion_and_rolls_back_the_same_way(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = f"sqlite:///{tmp_path / 'p.db'}"
    store = Store(db)
    data = FIXTURE.read_bytes()
    old = store.register_model("lstm-old", "lstm", artifact=data, status="champion")
    new = store.register_model("lstm-new", "lstm", artifact=data, status="challenger")
    bare = store.register_model("lstm-bare", "lstm", status="challenger")
    other = store.register_model("ridge", "ridge", status="champion")  # another family: untouched

    def promote(mid: int) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "scaleahead.cli", "models", "promote", str(mid), "--db", db]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    assert promote(new).returncode == 0
    assert [store.model(m).status for m in (old, new, other)] == ["retired", "champion", "champion"]
    back = promote(old)  # the rollback of a promoted model
    assert back.returncode == 0 and f"retired: {new}" in " ".join(back.stdout.split())
    assert [store.model(m).status for m in (old, new)] == ["champion", "retired"]
    refused = promote(bare)
    assert refused.returncode == 2 and "has no checkpoint" in refused.stderr
    assert store.model(bare).status == "challenger" and store.model(old).status == "champion"


def test_a_checkpoint_file_changed_since_training_is_not_loaded(tmp_path: Path) -> None:
    from scaleahead.retraining import load_model_version

    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    path = tmp_path / "model.pt"
    path.write_bytes(FIXTURE.read_bytes())
    mid = store.register_model(
        "lstm-file", "lstm", artifact_path=str(path), artifact_sha256=hashlib.sha256(path.read_bytes()).hexdigest()
    )
    assert load_model_version(store, mid, 60.0, []).name.startswith("lstm")
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the tensors: torch would load it
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="does not match the SHA-256 recorded at training"):
        load_model_version(store, mid, 60.0, [])
    store.close()
