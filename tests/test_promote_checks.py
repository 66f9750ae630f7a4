"""`scaleahead models promote` verifies the checkpoint the daemon would load before promoting a
learned version: it loads, and its content matches the digest it was saved with.

Before, only the file's SHA-256 (or the stored copy's) was compared with the one recorded at
registration: a checkpoint damaged before it was hashed (a byte changed in a weight: torch loads it
without noticing), or a file registered with no SHA-256, was promoted ("model N (lstm) is the
champion"), and the daemon, failing to load it, planned with its fallback model. Now the promotion
is refused with what was wrong and what to do, and nothing is recorded: the champion stays.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from forecaster.lstm import LSTMConfig, LSTMForecaster
from scaleahead.commands.forecasting import _promotable_checkpoint
from scaleahead.errors import UserError
from storage import Store
from tests.conftest import Cli


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real checkpoint of the current format (with its digest): untrained, tiny, written in ms."""
    path = tmp_path_factory.mktemp("ckpt") / "m.pt"
    LSTMForecaster.untrained(60.0, LSTMConfig(hidden=4, mlp=8, threads=1)).save(path)
    return path.read_bytes()


def _flip_in_member(data: bytes, member: str) -> bytes:
    """``data`` (a torch zip) with one byte in the middle of ``member``'s stored bytes changed."""
    z = zipfile.ZipFile(io.BytesIO(data))
    (info,) = [i for i in z.infolist() if i.filename.endswith(member)]
    local_extra = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + len(info.filename.encode()) + local_extra
    out = bytearray(data)
    out[start + info.compress_size // 2] ^= 0x5A
    return bytes(out)


def _in_a_weight(data: bytes) -> bytes:
    """A byte flipped in the largest weight tensor: torch loads it, only the digest tells."""
    z = zipfile.ZipFile(io.BytesIO(data))
    largest = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    return _flip_in_member(data, largest.filename)


def _in_the_pickle(data: bytes) -> bytes:
    """A byte flipped in the pickle that lists the checkpoint's fields: torch cannot read it."""
    return _flip_in_member(data, "data.pkl")


def _state(store: Store, *ids: int) -> list[tuple[str, object]]:
    return [(store.model(i).status, store.model(i).metrics.get("retired_at")) for i in ids]


def _with_champion(tmp_path: Path, checkpoint: bytes) -> tuple[str, Store, int]:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    store = Store(db)
    champion = store.register_model("lstm-old", "lstm", artifact=checkpoint, status="champion")
    return db, store, champion


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_in_a_weight, "does not match the digest it was saved with"),
        (_in_the_pickle, "is corrupt or not a checkpoint"),
    ],
)
@pytest.mark.parametrize("where", ["database", "file"])
def test_a_checkpoint_damaged_before_it_was_hashed_is_not_promoted(
    tmp_path: Path,
    checkpoint: bytes,
    cli: Cli,
    damage,
    says: str,
    where: str,  # type: ignore[no-untyped-def]
) -> None:
    damaged = damage(checkpoint)
    db, store, champion = _with_champion(tmp_path, checkpoint)
    path = tmp_path / "new.pt"
    path.write_bytes(damaged)
    sha = hashlib.sha256(damaged).hexdigest()  # what training records: the SHA-256 of what it wrote
    new = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(path),
        artifact_sha256=sha,
        artifact=damaged if where == "database" else None,
        status="challenger",
    )
    before = _state(store, champion, new)
    code, out, err = cli("models", "promote", str(new), "--db", db)
    assert code == 2, (out, err)
    what = "the checkpoint stored in the database" if where == "database" else f"its checkpoint file {path}"
    assert f"Model version {new}: {what} does not load (the daemon would plan with its fallback model)" in err
    assert says in err and "nothing was changed" in err and "Retrain (scaleahead train)" in err
    assert "is the champion" not in out
    assert _state(store, champion, new) == before == [("champion", None), ("challenger", None)]


def test_a_file_registered_without_a_sha256_is_still_checked(tmp_path: Path, checkpoint: bytes) -> None:
    """No SHA-256 recorded (registered by hand, or by an older scaleahead): the file is loaded."""
    _, store, champion = _with_champion(tmp_path, checkpoint)
    path = tmp_path / "new.pt"
    path.write_bytes(checkpoint)
    new = store.register_model("lstm-new", "lstm", artifact_path=str(path), status="challenger")
    assert _promotable_checkpoint(store, store.model(new)) == ""
    path.write_bytes(_in_a_weight(checkpoint))
    with pytest.raises(UserError, match=f"its checkpoint file {path} does not load .*digest"):
        _promotable_checkpoint(store, store.model(new))
    assert _state(store, champion, new) == [("champion", None), ("challenger", None)]


def test_a_missing_checkpoint_is_not_promoted(tmp_path: Path, checkpoint: bytes, cli: Cli) -> None:
    db, store, champion = _with_champion(tmp_path, checkpoint)
    path = tmp_path / "gone.pt"
    path.write_bytes(checkpoint)
    new = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(path),
        artifact_sha256=hashlib.sha256(checkpoint).hexdigest(),
        status="challenger",
    )
    path.unlink()
    code, out, err = cli("models", "promote", str(new), "--db", db)
    assert code == 2 and f"Model version {new} has no checkpoint, in the database or at {path}" in err
    assert "Promote a version that has one" in err
    assert _state(store, champion, new) == [("champion", None), ("challenger", None)]


def test_an_intact_checkpoint_is_promoted_and_a_damaged_file_beside_a_stored_copy_is_a_note(
    tmp_path: Path, checkpoint: bytes, cli: Cli
) -> None:
    db, store, champion = _with_champion(tmp_path, checkpoint)
    path = tmp_path / "new.pt"
    path.write_bytes(checkpoint)
    new = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(path),
        artifact_sha256=hashlib.sha256(checkpoint).hexdigest(),
        artifact=checkpoint,
        status="challenger",
    )
    path.write_bytes(_in_a_weight(checkpoint))  # the daemon loads the stored copy, which is intact
    code, out, err = cli("models", "promote", str(new), "--db", db)
    assert code == 0, err
    assert "the daemon loads the intact copy stored in the database" in " ".join(out.split())
    assert [store.model(i).status for i in (champion, new)] == ["retired", "champion"]


def test_a_missing_file_beside_an_intact_stored_copy_is_promoted_with_a_note(
    tmp_path: Path, checkpoint: bytes, cli: Cli
) -> None:
    """The promotion went through without a word about the file (checked in the audit of 2026-12-05)."""
    db, store, champion = _with_champion(tmp_path, checkpoint)
    path = tmp_path / "gone.pt"
    new = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(path),
        artifact_sha256=hashlib.sha256(checkpoint).hexdigest(),
        artifact=checkpoint,
        status="challenger",
    )
    code, out, err = cli("models", "promote", str(new), "--db", db)
    assert code == 0, err
    said = " ".join(out.split())
    assert f"note: the checkpoint file {path} is missing; the daemon loads the intact copy" in said
    assert [store.model(i).status for i in (champion, new)] == ["retired", "champion"]


def test_a_damaged_checkpoint_in_the_database_is_named_as_such_not_by_a_temporary_path(
    tmp_path: Path, checkpoint: bytes
) -> None:
    """The daemon's warning named /tmp/scaleahead-model-XXXX/model.ckpt, a copy deleted since
    (found by the fault-injection audit of 2026-12-05)."""
    from scaleahead.errors import DataError
    from scaleahead.retraining import load_model_version

    _, store, champion = _with_champion(tmp_path, _in_the_pickle(checkpoint))
    with pytest.raises(DataError) as err:
        load_model_version(store, champion, 10.0, [])
    assert f"Model version {champion}: LSTM checkpoint stored in the database is corrupt" in err.value.message
    assert "scaleahead-model-" not in str(err.value)
