"""Bad databases and bad options given to the storage-backed commands, through the real CLI.

A damaged SQLite file, another program's SQLite file, a path with no database, the storage URL of
the settings, rollout margins no canary can use, NaN in JSON output, and a damaged checkpoint
given to ``models promote``: each is one clear paragraph and exit code 2, with nothing written.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text, update

from scaleahead.errors import UserError
from storage import Store
from storage.schema import ModelArtifactRow


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``scaleahead ARGS`` in a fresh process, without any database setting of this environment."""
    base = {k: v for k, v in os.environ.items() if k not in ("SCALEAHEAD_STORAGE__URL", "SCALEAHEAD_DB_URL")}
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
    )


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def refused(out: subprocess.CompletedProcess[str], says: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in " ".join(out.stderr.split()), out.stderr
    assert "Traceback" not in out.stderr


def no_json_constants(token: str) -> None:
    raise AssertionError(f"invalid JSON constant {token}")


# The commands that open the database, with what they need to get that far.
READERS = [
    ["models", "list"],
    ["models", "show", "1"],
    ["models", "promote", "1"],
    ["rollout", "status"],
    ["actuator", "journal"],
    ["steers"],
]
WRITERS = [
    ["db", "upgrade"],
    ["rollout", "start", "--challenger", "web-v2", "--mode", "ab"],
]


# -- 1. a damaged SQLite file -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("damaged")
    garbage = folder / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 20)  # 5,120 bytes without a SQLite header
    good = folder / "good.db"
    store = Store(url(good))
    for i in range(200):
        store.register_model(f"m{i}", "ridge", hyperparams={"pad": "x" * 500})
    store.close()  # the last connection checkpoints the WAL into the file
    truncated = folder / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:8192])  # its schema pages, not its tables' pages
    return {"garbage": garbage, "truncated": truncated}


@pytest.mark.parametrize("args", READERS + WRITERS, ids=" ".join)
def test_a_file_that_is_not_a_database_is_refused_by_every_command_and_left_as_it_was(
    damaged: dict[str, Path], args: list[str]
) -> None:
    before = damaged["garbage"].read_bytes()
    out = cli(*args, "--db", url(damaged["garbage"]))
    refused(out, f"{url(damaged['garbage'])} is not a readable SQLite database (file is not a database)")
    assert "Restore it from a backup" in out.stderr
    assert damaged["garbage"].read_bytes() == before


@pytest.mark.parametrize("args", [["models", "list"], ["db", "upgrade"]], ids=" ".join)
def test_a_truncated_database_is_refused_as_malformed(damaged: dict[str, Path], args: list[str]) -> None:
    before = damaged["truncated"].read_bytes()
    refused(cli(*args, "--db", url(damaged["truncated"])), "(database disk image is malformed)")
    assert damaged["truncated"].read_bytes() == before


def test_a_damaged_file_is_a_user_error_of_the_store_itself(damaged: dict[str, Path]) -> None:
    for path in damaged.values():
        with pytest.raises(UserError, match="is not a readable SQLite database"):
            Store(url(path))


def test_a_database_found_damaged_in_a_later_query_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(url(path))
    store.register_model("m", "ridge")
    store.engine.dispose()  # the last connection checkpoints the WAL into the file
    raw = bytearray(path.read_bytes())
    raw[4096:] = b"\xff" * (len(raw) - 4096)  # every page but the schema's, under the open store
    path.write_bytes(bytes(raw))
    with pytest.raises(UserError, match="is not a readable SQLite database .database disk image is malformed"):
        store.models()


def test_an_unreachable_server_keeps_its_own_message() -> None:
    out = cli("models", "list", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    refused(out, "Cannot reach or write the database")


# -- 2. read-only commands create no database ---------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [*READERS, ["rollout", "promote"], ["rollout", "abort"], ["rollout", "evaluate", "--outcomes", "o.csv"]],
    ids=" ".join,
)
def test_a_command_that_only_reads_refuses_a_path_without_a_database_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "o.csv").write_text("workload,arm,violation_fraction,cost_per_demand\nw,champion,0.1,1\n")
    args = [str(tmp_path / a) if a == "o.csv" else a for a in args]
    missing = tmp_path / "nodir" / "x.db"
    out = cli(*args, "--db", url(missing))
    refused(out, f"No scaleahead database at {missing}")
    assert f"scaleahead db upgrade --db {url(missing)}" in " ".join(out.stderr.split())
    assert not missing.parent.exists()


def test_an_empty_file_is_no_database_for_a_reader_and_stays_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    refused(cli("models", "list", "--db", url(empty)), f"No scaleahead database at {empty} (the file has no tables)")
    assert empty.stat().st_size == 0


@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_commands_that_create_the_database_still_do(tmp_path: Path, args: list[str]) -> None:
    new = tmp_path / "new" / "x.db"
    out = cli(*args, "--db", url(new))
    assert out.returncode == 0, out.stderr
    assert new.is_file() and Store(url(new)).current_revision() == Store.head_revision()


# -- 3. another program's database ----------------------------------------------------------------------
@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE foo (x INTEGER)")
        conn.execute("INSERT INTO foo VALUES (1)")
    return path


def _sqlite_state(path: Path) -> tuple[list[str], str, bytes]:
    with sqlite3.connect(path) as conn:
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return tables, mode, path.read_bytes()


@pytest.mark.parametrize("args", READERS + WRITERS, ids=" ".join)
def test_a_sqlite_file_of_another_program_gets_no_scaleahead_tables(foreign: Path, args: list[str]) -> None:
    before = _sqlite_state(foreign)
    out = cli(*args, "--db", url(foreign))
    refused(out, f"{url(foreign)} is not a scaleahead database: it has tables (foo) but no scaleahead schema version")
    assert _sqlite_state(foreign) == before == (["foo"], "delete", before[2])


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("DELETE FROM alembic_version", "but its schema version is empty (no row in alembic_version)"),
        (
            "DROP TABLE actions",
            "is at schema revision '0013_outcomes' but has no table actions: the schema is damaged",
        ),
    ],
)
@pytest.mark.parametrize("args", [["actuator", "journal"], ["db", "upgrade"]], ids=" ".join)
def test_a_damaged_schema_is_named_as_such_even_by_a_reader_and_upgrade_does_not_pass_it(
    tmp_path: Path, damage: str, says: str, args: list[str]
) -> None:
    # An empty alembic_version read as "Cannot reach ... table model_versions already exists. Check
    # that the server is running"; a dropped table as "no such table", and `db upgrade` passed it.
    path = tmp_path / "s.db"
    Store(url(path)).engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute(damage)
    before = _sqlite_state(path)[0]
    out = cli(*args, "--db", url(path))
    refused(out, says)
    assert "Restore it from a backup, or point --db at another database; nothing was written." in " ".join(
        out.stderr.split()
    )
    assert _sqlite_state(path)[0] == before


def test_postgresql_shared_with_other_tables_is_fine_but_a_partial_schema_or_unknown_revision_is_not(
    db_url: str,
) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE foo (x INTEGER)"))
    if db_url.startswith("sqlite"):
        with pytest.raises(UserError, match=r"not a scaleahead database: it has tables \(foo\)"):
            Store(db_url)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE foo"))
    else:
        Store(db_url).close()  # another application's tables: scaleahead's are added beside them
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision()
    store.close()
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(UserError, match="at schema revision '9999_future', which this version of scaleahead"):
        Store(db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    with pytest.raises(UserError, match=r"has scaleahead tables \(actions, .*\) but no schema version"):
        Store(db_url)
    engine.dispose()


# -- 4. the settings' storage URL, as `run` reads it ---------------------------------------------------
def test_without_db_the_commands_use_the_storage_url_of_the_settings_like_run(tmp_path: Path) -> None:
    configured, legacy = tmp_path / "configured.db", tmp_path / "legacy.db"
    Store(url(configured)).register_model("from-settings", "ridge")
    Store(url(legacy)).register_model("from-db-url", "ridge")
    env = {
        "SCALEAHEAD_STORAGE__URL": url(configured),
        "SCALEAHEAD_DB_URL": url(legacy),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    out = cli("models", "list", "--output", "json", env=env)
    assert out.returncode == 0, out.stderr
    assert [m["name"] for m in json.loads(out.stdout)] == ["from-settings"]
    out = cli("rollout", "start", "--challenger", "1", "--mode", "shadow", env=env)
    assert out.returncode == 0, out.stderr
    assert [r.challenger for r in Store(url(configured)).rollouts()] == ["1"]
    legacy_only = {k: v for k, v in env.items() if k != "SCALEAHEAD_STORAGE__URL"}
    assert [m["name"] for m in json.loads(cli("models", "list", "--output", "json", env=legacy_only).stdout)] == [
        "from-db-url"
    ]
    assert not (tmp_path / "xdg").exists()


# -- 5. rollout margins and JSON without NaN ---------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "-1", "inf", "1.5"])
@pytest.mark.parametrize("option", ["--max-violation-increase", "--max-cost-increase", "--max-error-increase"])
def test_a_rollback_margin_that_is_not_finite_or_out_of_range_starts_nothing(
    tmp_path: Path, option: str, value: str
) -> None:
    db = url(tmp_path / "r.db")
    store = Store(db)
    mid = store.register_model("lstm-b", "lstm")
    out = cli("rollout", "start", "--challenger", str(mid), "--mode", "canary", option, value, "--db", db)
    refused(out, f"{option} {value} is not ")
    assert "between 0 and 1" in out.stderr and "nothing was started" in out.stderr
    assert store.rollouts() == []


def test_an_ab_split_that_is_not_a_number_starts_nothing(tmp_path: Path) -> None:
    out = cli(
        "rollout", "start", "--challenger", "p2", "--mode", "ab", "--split", "nan", "--db", url(tmp_path / "r.db")
    )
    refused(out, "--split nan is not a share strictly between 0 and 1")
    assert not (tmp_path / "r.db").exists()


def test_json_output_of_rows_holding_nan_is_valid_json_with_null(tmp_path: Path) -> None:
    db = url(tmp_path / "r.db")
    store = Store(db)
    store.register_model("ridge-a", "ridge", metrics={"val_loss": float("nan"), "mae": 1.5})
    params = {"steps": [0.1, 1.0], "max_cost_increase": float("nan"), "max_error_increase": float("inf")}
    rid = store.create_rollout("default", "canary", "1", "2", now=5.0, share=0.1, params=params)
    store.update_rollout(
        store.rollout(rid), 6.0, results={"last": {"decision": "wait", "reason": "r", "summary": {"x": float("nan")}}}
    )
    status = cli("rollout", "status", "--output", "json", "--db", db)
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout, parse_constant=no_json_constants)
    assert doc["params"]["max_cost_increase"] is None and doc["params"]["max_error_increase"] is None
    assert doc["last"]["summary"] == {"x": None}
    listed = json.loads(cli("models", "list", "--output", "json", "--db", db).stdout, parse_constant=no_json_constants)
    assert listed[0]["metrics"] == {"val_loss": None, "mae": 1.5}
    shown = json.loads(cli("models", "show", "1", "--db", db).stdout, parse_constant=no_json_constants)
    assert shown["metrics"]["val_loss"] is None


# -- 6. promoting a version whose checkpoint is damaged ----------------------------------------------------
def _lstm(store: Store, folder: Path, name: str, stored: bool) -> tuple[int, Path]:
    # a real checkpoint: the one the daemon would load must also load (tests/test_promote_checks.py)
    data = (Path(__file__).parent / "forecaster" / "fixtures" / "lstm_v2_60s.pt").read_bytes()
    path = folder / f"{name}.pt"
    path.write_bytes(data)
    mid = store.register_model(
        name,
        "lstm",
        artifact_path=str(path),
        artifact_sha256=hashlib.sha256(data).hexdigest(),
        artifact=data if stored else None,
        status="challenger",
    )
    return mid, path


def test_promote_refuses_a_damaged_checkpoint_file_unless_the_stored_copy_is_intact(tmp_path: Path) -> None:
    db = url(tmp_path / "p.db")
    store = Store(db)
    champion, _ = _lstm(store, tmp_path, "lstm-old", stored=True)
    store.make_champion(champion)
    file_only, file_only_path = _lstm(store, tmp_path, "lstm-file", stored=False)
    both, both_path = _lstm(store, tmp_path, "lstm-both", stored=True)
    file_only_path.write_bytes(b"tampered")
    both_path.write_bytes(b"tampered")

    out = cli("models", "promote", str(file_only), "--db", db)
    refused(out, f"its checkpoint file {file_only_path} does not match the SHA-256 recorded at training")
    assert "no copy is stored in the database" in " ".join(out.stderr.split())
    assert store.model(file_only).status == "challenger" and store.model(champion).status == "champion"

    out = cli("models", "promote", str(both), "--db", db)
    assert out.returncode == 0, out.stderr
    assert "the daemon loads the intact copy stored in the database" in " ".join(out.stdout.split())
    assert store.model(both).status == "champion"

    intact, _ = _lstm(store, tmp_path, "lstm-bad-row", stored=True)
    with store.session() as s:
        s.execute(update(ModelArtifactRow).where(ModelArtifactRow.model_id == intact).values(data=b"cut"))
    out = cli("models", "promote", str(intact), "--db", db)
    refused(out, "the checkpoint stored in the database does not match its SHA-256")
    assert "is intact" in out.stderr and store.model(intact).status == "challenger"


def test_a_write_that_fails_after_adding_a_workload_leaves_no_stale_workload_id(tmp_path: Path) -> None:
    import numpy as np
    from sqlalchemy.exc import OperationalError

    from scaleahead.types import Forecast, WorkloadRef
    from tests.conftest import fail_once

    store = Store(f"sqlite:///{tmp_path / 'w.db'}")

    def fc(name: str, t: float) -> Forecast:
        ref = WorkloadRef("Deployment", "shop", name)
        return Forecast(ref, t, 10.0, {q: np.full(90, 100.0) for q in (0.1, 0.5, 0.9)}, "m")

    store.record_forecasts([fc("a", 0.0)])
    fail_once(store.engine, "INSERT INTO forecasts", "disk I/O error")

    with pytest.raises(OperationalError):
        store.record_forecasts([fc("new", 1000.0)])  # the workload row is rolled back with it
    assert store.record_forecasts([fc("new", 2000.0)]) == 1  # was: FOREIGN KEY constraint failed, every cycle
    assert store.record_forecasts([fc("d", 3000.0)]) == 1
    assert [f.origin for f in store.forecasts(WorkloadRef("Deployment", "shop", "new"))] == [2000.0]
    assert [f.origin for f in store.forecasts(WorkloadRef("Deployment", "shop", "d"))] == [3000.0]
    store.close()


def test_a_migration_that_fails_part_way_on_sqlite_leaves_the_schema_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alembic.operations import Operations

    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = Store(url, upgrade=False)
    store.upgrade("0002_actuator")
    store.close()

    def killed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("killed mid-migration")

    with monkeypatch.context() as m:
        m.setattr(Operations, "create_index", killed)  # 0003 creates its table, then fails at its index
        with pytest.raises(RuntimeError, match="killed mid-migration"):
            Store(url)
    with sqlite3.connect(tmp_path / "m.db") as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        assert "pod_steers" not in tables  # rolled back with the failed migration
        assert list(conn.execute("select version_num from alembic_version")) == [("0002_actuator",)]
    again = Store(url)  # was: "table pod_steers already exists", at every start
    assert again.current_revision() == Store.head_revision()
    again.close()


def test_a_write_command_on_a_locked_database_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "lock.db"
    store = Store(f"sqlite:///{path}")
    store.register_model("m", "ridge", status="champion")
    second = store.register_model("n", "ridge")
    store.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer (the control loop) holds the lock
    try:
        proc = cli("models", "promote", str(second), "--db", f"sqlite:///{path}")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: the database could not be read or written: database is locked." in proc.stderr


def test_non_finite_numbers_in_an_actions_details_are_stored_as_json_can_hold_them(db_url: str) -> None:
    """PostgreSQL refuses Infinity in a JSON column: a plan whose warm-pool reason said "never
    invoked" (idle_s inf) failed to record. They are stored as null, as the CLI's JSON has them."""
    import math

    from scaleahead.types import Plan, Reason, SetWarmPool, WorkloadRef

    store = Store(db_url)
    details = {"idle_s": math.inf, "p": math.nan, "floor": -math.inf, "nested": {"x": [1.5, math.inf]}}
    a = SetWarmPool(WorkloadRef("KnativeService", "fns", "f"), 1, 0, 0.0, Reason("cold_ok", "cool", details))
    store.record_plan(Plan(1000.0, (a,)), source="loop")
    model = store.register_model("m", "lstm", metrics={"holdout_wape": math.nan})
    assert store.model(model).metrics["holdout_wape"] is None
    (row,) = store.actions()
    assert row.reason == "cool"
    with store.session() as s:
        from storage.schema import ActionRow

        stored = s.get(ActionRow, row.id).reason_details
    assert stored == {"idle_s": None, "p": None, "floor": None, "nested": {"x": [1.5, None]}}


@pytest.mark.parametrize(
    ("write", "column", "limit"),
    [
        (lambda st: st.create_rollout("team-" + "x" * 160, "shadow", "1", "2", now=1.0), "rollouts.group", 128),
        (lambda st: st.create_rollout("web", "shadow", "1", "model:" + "9" * 300, now=1.0), "rollouts.challenger", 256),
        (lambda st: st.register_model("lstm-" + "n" * 200, "lstm"), "model_versions.name", 128),
        (
            lambda st: st.register_model("m", "lstm", data_source="prometheus:" + "q" * 600),
            "model_versions.data_source",
            512,
        ),
    ],
)
def test_a_value_longer_than_its_column_is_refused_the_same_on_every_database(
    db_url: str, write: Any, column: str, limit: int
) -> None:
    """SQLite stored an over-long value whole; PostgreSQL refused it with a raw DataError (a
    retraining of a policy with a 164-character rolloutGroup failed there with a traceback). Both
    refuse it before writing, naming the column and its limit, and record nothing."""
    from storage.store import ValueTooLong

    store = Store(db_url)
    with pytest.raises(
        ValueTooLong, match=f"as {column}: it is [0-9]+ characters long, the column holds at most {limit}"
    ):
        write(store)
    assert (store.rollouts(), store.models()) == ([], [])
    store.close()


def test_a_workload_or_action_too_long_for_its_column_is_refused_before_anything_is_written(db_url: str) -> None:
    from scaleahead.types import Forecast, Plan, Reason, ScaleTo, WorkloadRef
    from storage.store import ValueTooLong

    store = Store(db_url)
    long = WorkloadRef("Deployment", "shop", "w" * 300)
    with pytest.raises(ValueTooLong, match="workloads.name"):
        store.record_forecasts([Forecast(long, 0.0, 10.0, {0.5: np.ones(3)}, "lstm")])
    reason = Reason("forecast", "scale", {})
    with pytest.raises(ValueTooLong, match="actions.reason_code"):
        store.record_plan(
            Plan(0.0, (ScaleTo(WorkloadRef("Deployment", "shop", "w"), 1, 2, Reason("r" * 70, "s", {})),), {}), "test"
        )
    store.record_plan(Plan(0.0, (ScaleTo(WorkloadRef("Deployment", "shop", "w"), 1, 2, reason),), {}), "test")
    assert (store.workloads(), store.count_plans(), store.count_actions(), store.count_forecasts()) == ([], 1, 1, 0)
    store.close()


def test_postgresqls_own_value_too_long_is_one_paragraph_too(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value no check saw (the checks switched off here): PostgreSQL's refusal is a UserError."""
    import storage.store

    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite does not enforce VARCHAR lengths")
    monkeypatch.setattr(storage.store, "_check_lengths", lambda table, values: None)
    store = Store(db_url)
    with pytest.raises(UserError, match=r"refused a value: value too long for type character varying\(128\)"):
        store.create_rollout("g" * 200, "shadow", "1", "2", now=1.0)
    store.close()


def test_db_upgrade_on_a_database_another_process_holds_locked_says_so_not_to_check_the_server(
    tmp_path: Path,
) -> None:
    """It said "Check that the server is running ... or leave --db out", which points at another
    database (found in the audit of 2026-12-05)."""
    path = tmp_path / "lock.db"
    Store(f"sqlite:///{path}", upgrade=False).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        proc = cli("db", "upgrade", "--db", f"sqlite:///{path}")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "is locked by another process" in said and "nothing was written" in said, said
    assert "leaving --db out" not in said


def test_a_postgresql_server_that_accepts_but_never_answers_is_given_up_after_the_connect_timeout() -> None:
    """A socket that accepts connections and never speaks: the store waited as long as the kernel
    kept it (a cycle, or a pod steering review, held for minutes)."""
    import socket
    import threading

    from storage.store import PG_CONNECT_TIMEOUT_S, _connect_args

    assert _connect_args("postgresql+psycopg://u:p@db/x") == {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    assert _connect_args("postgresql+psycopg://u:p@db/x?connect_timeout=2") == {}  # the URL's own wins
    assert _connect_args("sqlite:///x.db") == {}
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql+psycopg://u:p@127.0.0.1:{silent.getsockname()[1]}/x"
        outcome: list[BaseException | None] = []

        def connect() -> None:
            try:
                Store(url).close()
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome.append(exc)

        worker = threading.Thread(target=connect, daemon=True)
        worker.start()
        worker.join(timeout=PG_CONNECT_TIMEOUT_S * 4 + 10)
        assert outcome, "still waiting for the server: no connect timeout"
    assert isinstance(outcome[0], UserError), outcome
    assert "Cannot reach or write the database" in str(outcome[0]) and "p@" not in str(outcome[0])


def test_a_lone_surrogate_is_escaped_in_free_text_and_refused_elsewhere_the_same_on_every_database(
    db_url: str,
) -> None:
    """A lone surrogate (``'\\ud800'``: half of a UTF-16 pair, from an escape in a JSON or YAML
    string or from undecodable bytes in an argument) cannot be stored as UTF-8: the driver raised a
    bare ``UnicodeEncodeError``. A reason or outcome keeps it as its escape, so that one such
    message cannot fail every journal after it (the actuator retries a failed journal's outcomes);
    a key (a target, a source, a field record) is refused as one paragraph, nothing written. With
    a missing action row beside it, both databases refuse the same way (the pipeline raised the
    encoder's error, the Core path the missing row)."""
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
    from storage.store import FieldWrite, NotUnicode

    bad = "half \ud800 a pair"
    store = Store(db_url)
    w = WorkloadRef("Deployment", "shop", "web")
    _, (aid,) = store.record_plan(Plan(1.0, (ScaleTo(w, 1, 2, Reason("forecast", bad, {})),)), "loop")
    store.journal([(aid, "applied", f"-> 2; {bad}")], [], 2.0)
    (row,) = store.actions()
    assert (row.reason, row.state, row.outcome) == ("half \\ud800 a pair", "applied", "-> 2; half \\ud800 a pair")
    store.set_action_states([(aid, "failed", bad)], 3.0)
    assert store.set_action_states_from([(aid, "skipped", bad)], 4.0, only_from="failed") == {aid}
    assert store.actions()[0].outcome == "half \\ud800 a pair"

    with pytest.raises(NotUnicode, match=r"holds '\\ud800' at position 5, a lone surrogate.*nothing was recorded"):
        store.record_plan(Plan(5.0, (ScaleTo(w, 2, 3, Reason("forecast", "ok", {})),)), bad)
    with pytest.raises(NotUnicode, match="a lone surrogate"):
        store.actions(target=f"shop/{bad}")
    gone = 10**6
    for outcomes in ([(aid, "applied", "ok")], [(gone, "applied", "ok")]):
        with pytest.raises(NotUnicode, match="a lone surrogate"):
            store.journal(outcomes, [FieldWrite(w.key, "replicas", 3, bad, 6.0)], 6.0)
    assert (store.count_plans(), store.actions()[0].state, store.managed_field(w.key)) == (1, "skipped", None)
    store.journal([], [FieldWrite(w.key, "replicas", 3, "rv1", 7.0)], 7.0)  # and the store goes on
    assert store.managed_field(w.key) is not None
    store.close()


def test_a_non_utf8_argument_is_one_clear_error(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in an argument reach Python as lone surrogates (surrogateescape)."""
    db = tmp_path / "j.db"
    Store(url(db)).close()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaleahead.cli",
            "actuator",
            "journal",
            "--db",
            url(db),
            "--workload",
            b"shop/w\xff".decode(errors="surrogateescape"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    refused(out, "holds '\\udcff' at position 6, a lone surrogate")


def test_a_character_a_postgresql_database_in_another_encoding_cannot_hold_names_the_encoding(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a lone surrogate is "not valid Unicode": in a LATIN1 database valid text such as 中 was
    reported as one (a review of the surrogate fix)."""
    import psycopg

    admin = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    name = f"latin{int(__import__('time').time() * 1e6) % 10**9}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    store = Store(postgres_url.rsplit("/", 1)[0] + f"/{name}", upgrade=False)
    try:
        # refused up front, before any table is made (a character LATIN1 lacks would fail each write)
        with pytest.raises(UserError, match="has the encoding LATIN1: scaleahead stores text in any language"):
            store.upgrade()
        assert store.current_revision() is None
        # and a database made anyway (the check passed by): the write's error names the encoding
        monkeypatch.setattr(Store, "_check_encoding", lambda self: None)
        store.upgrade()
        w = WorkloadRef("Deployment", "shop", "web")
        with pytest.raises(UserError, match=r"cannot hold '中' \(in 'scale 中'\): its encoding is latin-1, not UTF-8"):
            store.record_plan(Plan(1.0, (ScaleTo(w, 1, 2, Reason("forecast", "scale 中", {})),)), "loop")
        assert store.count_plans() == 0
    finally:
        store.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name}")
