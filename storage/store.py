"""The ``Store``: one object through which everything is recorded and read back.

Opening a store migrates the database to the newest schema (``scaleahead db upgrade`` does the
same explicitly). Forecasts are stored compactly: float16 quantile values, one row per recorded
forecast, at most one per workload per ``forecast_interval_s`` (docs/storage.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Boolean,
    Connection,
    Engine,
    Integer,
    String,
    Table,
    bindparam,
    column,
    create_engine,
    delete,
    event,
    func,
    insert,
    make_url,
    select,
    text,
    update,
    values,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects import postgresql as postgresql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import DataError as SQLDataError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import SingletonThreadPool

from scaleahead.errors import DataError, UserError, hide_password
from scaleahead.types import Action, Forecast, Plan, QuantileRows, WorkloadRef, action_endpoints
from storage.schema import (
    ActionRow,
    Base,
    ForecastRow,
    ManagedFieldRow,
    ModelArtifactRow,
    ModelVersionRow,
    OutcomeRow,
    PlanRow,
    PodSteerRow,
    RiskFactorRow,
    RolloutRow,
    WorkloadRow,
)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

log = logging.getLogger("scaleahead.storage")

#: Tries of a PostgreSQL migration whose table locks other sessions hold: each waits at most
#: ``storage.migration_lock_timeout_s`` (``lock_timeout``), then the transaction is rolled back
#: (nothing migrated, the tables' readers let go) and, after a pause, tried again; after the last
#: a ``UserError`` names the sessions (found in an audit, 2026-12-06: it waited without limit).
MIGRATION_LOCK_TRIES = 3

#: Seconds between those tries (at most; never more than the lock timeout).
MIGRATION_LOCK_PAUSE_S = 1.0

#: Forecasts the prune job deletes per transaction; plans (with their actions) go a tenth as many
#: per transaction (found in an audit, 2026-12-06: one transaction for all held SQLite's write lock
#: for minutes at 10,000 workloads, and the loop's writes failed with "database is locked").
PRUNE_BATCH = 10_000

#: Seconds the prune pauses between two batches on SQLite, so that a writer waiting for the write
#: lock gets it (its busy handler looks again at most every 100 ms).
PRUNE_PAUSE_S = 0.15

#: ``pg_advisory_xact_lock`` key held while the schema is migrated (any constant, the same in every
#: scaleahead: "scaleahd" in ASCII).
MIGRATION_LOCK = 0x7363616C65616864

#: The statuses that make a model version its family's champion (``production`` is read like
#: ``champion``). At most one version per family has one: the partial unique index
#: ``ux_model_versions_one_champion`` (migration 0010_one_champion).
CHAMPION_STATUSES = ("champion", "production")

#: First key of the ``pg_advisory_xact_lock(key, hashtext(family))`` a promotion holds ("chmp").
CHAMPION_LOCK = 0x63686D70

#: Action journal states.
ACTION_STATES = ("planned", "applied", "failed", "skipped", "dry-run")


def default_db_url() -> str:
    """The database of every command without ``--db``, as the daemon (``run``) resolves it: the
    settings' ``storage.url`` (``$SCALEAHEAD_STORAGE__URL``), else ``$SCALEAHEAD_DB_URL``, else SQLite
    at ``$XDG_DATA_HOME/scaleahead/scaleahead.db``."""
    from scaleahead.settings import Settings

    configured = Settings.from_env().storage.url
    if configured:
        return configured
    env = os.environ.get("SCALEAHEAD_DB_URL")
    if env:
        return env
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'scaleahead' / 'scaleahead.db'}"


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


#: The kinds of an action's target (``Kind/namespace/name``): the workloads a policy can target,
#: the Headroom a policy's spare capacity is, and a moved pod.
TARGET_KINDS = ("Deployment", "StatefulSet", "KnativeService", "Headroom", "Pod")


def json_safe(value: Any) -> Any:
    """``value`` with its non-finite floats as null, as the CLI's JSON output has them. JSON has no
    such numbers: PostgreSQL refuses ``Infinity`` in a JSON column (a plan with "never invoked"
    in a reason's details failed to record there), and strict parsers refuse it. Null, not a
    string: readers of stored numbers take None as unknown, where a string would fail."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def json_dumps(value: Any) -> str:
    """The JSON columns' serializer (``json_safe``, then strict JSON)."""
    return json.dumps(json_safe(value), allow_nan=False, default=str)


class _LockTimedOut(Exception):
    """A migration's transaction waited ``lock_timeout`` for a lock another session holds (rolled back)."""

    def __init__(self, exc: OperationalError) -> None:
        super().__init__(str(exc))
        self.exc = exc


class _TooLate(Exception):
    """A transaction that ran past its caller's deadline: rolled back, not an error."""


@dataclass(frozen=True, slots=True)
class ModelVersion:
    id: int
    name: str
    family: str
    status: str
    #: When it was registered: timezone-aware, in UTC, on every database.
    created_at: datetime
    data_source: str
    data_start: float | None
    data_end: float | None
    step_s: float | None
    hyperparams: dict[str, Any]
    metrics: dict[str, Any]
    artifact_path: str
    artifact_sha256: str

    @property
    def pruned_note(self) -> str:
        """Empty, or why the version has no stored checkpoint any more: `` (its checkpoint was
        pruned on DATE: jobs.model_retention_days)``."""
        at = self.metrics.get("checkpoint_pruned_at")
        if not isinstance(at, int | float):
            return ""
        day = datetime.fromtimestamp(float(at), UTC).strftime("%Y-%m-%d")
        return f" (its checkpoint was pruned on {day}: jobs.model_retention_days)"


@dataclass(frozen=True, slots=True)
class StoredAction:
    id: int
    plan_id: int
    kind: str
    target: str
    from_value: str
    to_value: str
    reason_code: str
    reason: str
    state: str
    outcome: str
    updated_at: float
    #: The reason's numbers as journaled (``reason_details``); a pod move's include ``pod_uid``.
    details: Mapping[str, Any] = field(default_factory=dict)
    #: Who made its plan (``plans.source``): ``loop``, ``shadow`` (a shadow rollout's challenger,
    #: never applied), ``cli-plan`` (``scaleahead plan``), ``actuator``, ...
    source: str = ""


@dataclass(frozen=True, slots=True)
class ManagedField:
    """What the actuator last wrote to a field (and a human edit seen on it since)."""

    target: str
    field: str
    value: int
    resource_version: str
    written_at: float
    human_value: int | None = None
    human_seen_at: float | None = None
    #: The value scaleahead last confirmed writing (None: none since migration 0007_written).
    written_value: int | None = None
    #: The field before scaleahead's first write to it (``original_value``; None: the field was not
    #: set), when that was recorded (``original_recorded``; since migration 0008_original).
    original_recorded: bool = False
    original_value: int | None = None
    #: The object's ``metadata.uid`` as last recorded (None: not known; since migration 0011_managed_uid).
    uid: str | None = None
    #: The field manager of the last edit seen (None: not named) and how many of scaleahead's writes
    #: in a row it undid (since migration 0011_managed_uid).
    editor: str | None = None
    editor_reverts: int = 0


class Unrecorded:
    """The type of ``UNRECORDED``: no original value given to ``Store.set_managed_field``."""


#: ``Store.set_managed_field(original=...)`` default: nothing known about the field before.
UNRECORDED = Unrecorded()


@dataclass(frozen=True, slots=True)
class FieldWrite:
    """One ``set_managed_field`` call, for ``Store.journal`` (the same arguments, the same meaning)."""

    target: str
    field: str
    value: int
    resource_version: str
    now: float
    written: bool = False
    original: int | None | Unrecorded = UNRECORDED
    uid: str = ""


def _outcome_update() -> Any:
    t = cast(Table, ActionRow.__table__)
    return (
        update(t)
        .where(t.c.id == bindparam("aid"))
        .values(state=bindparam("st"), outcome=bindparam("out"), updated_at=bindparam("at"))
    )


def _field_params(w: FieldWrite) -> dict[str, Any]:
    """The parameters of ``_field_upsert`` for the write ``w``: a NULL ``w_written``/``w_uid`` keeps
    the record's; ``w_recorded``/``w_original``: whether and what a first write records as the
    field's original."""
    recorded = not isinstance(w.original, Unrecorded)
    return {
        "w_target": w.target,
        "w_field": w.field,
        "w_value": w.value,
        "w_rv": w.resource_version,
        "w_now": w.now,
        "w_written": w.value if w.written else None,
        "w_uid": w.uid or None,
        "w_recorded": recorded,
        "w_original": w.original if recorded else None,
    }


def _field_insert(ins: Callable[[Table], Any]) -> Any:
    """A record's first write (``_set_managed_field``'s new record), with the parameters of
    ``_field_params``; ``ins``: a dialect's ``insert``."""
    t = cast(Table, ManagedFieldRow.__table__)
    return ins(t).values(
        target=bindparam("w_target"),
        field=bindparam("w_field"),
        value=bindparam("w_value"),
        resource_version=bindparam("w_rv"),
        written_at=bindparam("w_now"),
        written_value=bindparam("w_written", type_=Integer),
        uid=bindparam("w_uid", type_=String),
        original_recorded=bindparam("w_recorded", type_=Boolean),
        original_value=bindparam("w_original", type_=Integer),
        editor_reverts=0,
    )


_OUTCOME_UPDATE = _outcome_update()
#: the same, only where the row's state is still ``from_state`` (``set_action_states_from``)
_OUTCOME_UPDATE_FROM = _outcome_update().where(ActionRow.__table__.c.state == bindparam("from_state"))


def _outcome_updates_from(rows: Sequence[tuple[int, str, str]], now: float, from_state: str) -> Any:
    """``_OUTCOME_UPDATE_FROM`` for every row of ``rows`` in ONE statement, returning the ids it
    wrote: ``UPDATE actions ... FROM (VALUES ...) RETURNING id``, PostgreSQL's spelling (SQLite's
    VALUES takes no column names)."""
    t = cast(Table, ActionRow.__table__)
    v = values(column("vid", Integer), column("vst", String), column("vout", String), name="v").data(list(rows))
    return (
        update(t)
        .where(t.c.id == v.c.vid, t.c.state == from_state)
        .values(state=v.c.vst, outcome=v.c.vout, updated_at=now)
        .returning(t.c.id)
    )


def _field_upsert(dialect: Any) -> Any:
    """``_set_managed_field`` as ONE statement (``INSERT ... ON CONFLICT (target) DO UPDATE``, in
    ``dialect``'s spelling): a new record as its first write makes it (with the field's original),
    else the write's field, value, version and time, the human edit cleared, ``written_value`` and
    ``uid`` kept where the write leaves them (a NULL parameter), the original, editor and revert
    count untouched."""
    t = cast(Table, ManagedFieldRow.__table__)
    ins = _field_insert(dialect.insert)
    new = ins.excluded
    return ins.on_conflict_do_update(
        index_elements=[t.c.target],
        set_={
            "field": new.field,
            "value": new.value,
            "resource_version": new.resource_version,
            "written_at": new.written_at,
            "human_value": None,
            "human_seen_at": None,
            "written_value": func.coalesce(new.written_value, t.c.written_value),
            "uid": func.coalesce(new.uid, t.c.uid),
        },
    )


#: ``Store.managed_field``'s read, built once.
_MANAGED_BY_TARGET = select(ManagedFieldRow.__table__).where(
    cast(Table, ManagedFieldRow.__table__).c.target == bindparam("t")
)

#: The journal's field write per database (``Store.journal``), built once.
_FIELD_UPSERTS = {"postgresql": _field_upsert(postgresql_dialect), "sqlite": _field_upsert(sqlite_dialect)}


@functools.cache
def _psycopg_sql(stmt: Any) -> tuple[str, dict[str, Any]]:
    """One of the journal's statements as psycopg runs it: its text (``%(name)s`` parameters) and
    the values of the parameters it binds itself (``editor_reverts`` 0, the cleared human edit),
    which each row's parameters complete (``Store._journal_pipelined``)."""
    from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg

    compiled = stmt.compile(dialect=postgresql_psycopg.dialect())  # type: ignore[no-untyped-call]
    return str(compiled), dict(compiled.params)


@functools.cache
def _checked_outcome_update() -> tuple[str, dict[str, Any]]:
    """``_OUTCOME_UPDATE`` as the journal's pipeline sends it (``_psycopg_sql``), made to fail on
    the server where it finds no action row: ``1 / count(*)`` of the rows it wrote is a division by
    zero, which aborts the transaction, so nothing of it is written and its COMMIT can go in the
    same round trip instead of waiting for the row count (``Store._journal_pipelined``)."""
    sql, bound = _psycopg_sql(_OUTCOME_UPDATE)
    return f"WITH written AS ({sql} RETURNING actions.id) SELECT 1 / count(*) FROM written", bound


class RolloutRunning(Exception):
    """``Store.create_rollout``: another rollout of the group is running (one at a time per group)."""

    def __init__(self, group: str) -> None:
        super().__init__(f"a rollout is running in group {group!r}")
        self.group = group


class RolloutChanged(UserError):
    """A rollout changed between the caller's read and its write (``Store.update_rollout``,
    ``promote_rollout``): nothing was recorded."""

    def __init__(self, rollout_id: int, state: str) -> None:
        super().__init__(
            f"Rollout {rollout_id} changed meanwhile (now {state}); nothing was recorded.",
            "Run the command again (see `scaleahead rollout status`).",
        )
        self.rollout_id, self.state = rollout_id, state


def _shown(value: str) -> str:
    """``value`` as an error quotes it: whole up to 60 characters, else its start and end."""
    return value if len(value) <= 60 else f"{value[:40]}...{value[-12:]}"


class ValueTooLong(UserError):
    """A value longer than its column holds (``VARCHAR(n)``), refused before it is written and the
    same on every database: SQLite would store it whole, PostgreSQL refuse it with a raw DataError."""

    def __init__(self, column: str, limit: int, value: str) -> None:
        super().__init__(
            f"Cannot record {_shown(value)!r} as {column}: it is {len(value)} characters long, the column holds "
            f"at most {limit}; nothing was recorded.",
            "Shorten it (a policy's name, namespace, target or rolloutGroup; a rollout's arm; a model's name or "
            "data source).",
        )
        self.column, self.limit, self.length = column, limit, len(value)


class NotUnicode(UserError):
    """A value holding a lone surrogate (``'\\ud800'``), a character that is not valid Unicode: no
    database's UTF-8 can hold it, and the driver's encoder raised a bare ``UnicodeEncodeError``
    (with a traceback) for it, on SQLite and PostgreSQL alike."""

    def __init__(self, value: str, position: int) -> None:
        super().__init__(
            f"Cannot record or look up {_shown(value)!r}: it holds {value[position]!r} at position {position}, a lone "
            "surrogate, which is not valid Unicode and cannot be stored as UTF-8; nothing was recorded.",
            "Remove the character where the value came from: an escape such as \\ud800 in a JSON or YAML string, "
            "or bytes that are not UTF-8 in a command-line argument, an environment variable or a file name.",
        )
        self.value, self.position = value, position


def storable_text(value: str) -> str:
    """``value`` as a free-text column (a reason, an outcome) stores it: a lone surrogate written as
    its escape (``\\ud800``), so that one bad character in a message cannot fail the transaction
    (the actuator keeps a failed journal's outcomes for its next one: one such outcome failed every
    journal after it)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _refuse_not_unicode(values: Iterable[str | None]) -> None:
    """``NotUnicode`` for the first of ``values`` that cannot be stored as UTF-8."""
    for v in values:
        if v is None or v.isascii():
            continue
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NotUnicode(v, exc.start) from None


#: Seconds to wait for a PostgreSQL server to accept a connection (libpq's ``connect_timeout``,
#: unless the URL sets one): a server that accepts TCP but never answers held a cycle, or a pod
#: steering review, for as long as the kernel kept the socket (found in an audit, 2026-12-05).
PG_CONNECT_TIMEOUT_S = 5


def _connect_args(url: str) -> dict[str, Any]:
    """The driver's connect arguments: a connect timeout for PostgreSQL (none for SQLite)."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - create_engine says what is wrong with the URL
        return {}
    if parsed.get_backend_name() != "postgresql" or "connect_timeout" in parsed.query:
        return {}
    return {"connect_timeout": PG_CONNECT_TIMEOUT_S}


def _check_lengths(table: Any, values: Mapping[str, Any]) -> None:
    """Refuse (``ValueTooLong``) a string in ``values`` (column name -> value) longer than its
    column of ``table`` holds."""
    for key, value in values.items():
        if not isinstance(value, str):
            continue
        column = table.c.get(key)
        limit = getattr(column.type, "length", None) if column is not None else None
        if limit is not None and len(value) > limit:
            raise ValueTooLong(f"{table.name}.{column.name}", limit, value)


@functools.cache
def _bounded_columns(mapper: Any) -> tuple[tuple[str, str], ...]:
    """``(attribute, column name)`` of a mapped class's columns with a length (``VARCHAR(n)``), once per class."""
    return tuple(
        (p.key, p.columns[0].name)
        for p in mapper.column_attrs
        if getattr(p.columns[0].type, "length", None) is not None
    )


def _check_flush_lengths(session: Session, _context: Any, _instances: Any) -> None:
    """Before a flush: every new or changed row's strings fit their columns (``_check_lengths``)."""
    for obj in (*session.new, *session.dirty):
        mapper = sa_inspect(obj).mapper
        _check_lengths(mapper.local_table, {name: getattr(obj, key) for key, name in _bounded_columns(mapper)})


class ChampionChanged(UserError):
    """Another version of the family became its champion while a promotion was being recorded
    (a writer that did not wait for the family's lock): the one-champion index refused the second,
    nothing was recorded."""

    def __init__(self, version: str, family: str) -> None:
        super().__init__(
            f"{version} was not made the champion of {family!r}: another version of the family became its "
            "champion meanwhile; nothing was recorded.",
            "Run the command again (see `scaleahead models list`).",
        )
        self.version, self.family = version, family


def _second_champion(exc: IntegrityError) -> bool:
    """The one-champion-per-family index refused a write (PostgreSQL names the index, SQLite the column)."""
    why = str(exc.orig)
    return "ux_model_versions_one_champion" in why or "model_versions.family" in why


@contextmanager
def _one_champion(version: str, family: Callable[[], str]) -> Iterator[None]:
    """Turn the one-champion index's refusal into ``ChampionChanged`` (``family`` is read only then)."""
    try:
        yield
    except IntegrityError as exc:
        if not _second_champion(exc):
            raise
        raise ChampionChanged(version, family()) from exc


@dataclass(frozen=True, slots=True)
class StoredRollout:
    id: int
    group: str
    mode: str
    state: str
    champion: str
    challenger: str
    share: float
    started_at: float
    updated_at: float
    params: dict[str, Any]
    results: dict[str, Any]


def _rollout(r: RolloutRow) -> StoredRollout:
    return StoredRollout(
        r.id,
        r.group,
        r.mode,
        r.state,
        r.champion,
        r.challenger,
        r.share,
        r.started_at,
        r.updated_at,
        dict(r.params),
        dict(r.results),
    )


@dataclass(frozen=True, slots=True)
class StoredSteer:
    """A pod steer (``PodSteerRow``): the next new pod of ``owner_kind/owner_name`` goes to ``node``."""

    id: int
    namespace: str
    owner_kind: str
    owner_name: str
    evicted_pod: str
    node: str
    created_at: float
    expires_at: float
    state: str
    consumed_by: str
    updated_at: float


#: Pod steer states.
STEER_STATES = ("pending", "consumed", "expired", "cancelled")


def _steer(r: PodSteerRow) -> StoredSteer:
    return StoredSteer(
        r.id,
        r.namespace,
        r.owner_kind,
        r.owner_name,
        r.evicted_pod,
        r.node,
        r.created_at,
        r.expires_at,
        r.state,
        r.consumed_by,
        r.updated_at,
    )


def _managed(r: Any) -> ManagedField:
    """A ``ManagedFieldRow``, or a Core row of its table, as a ``ManagedField``."""
    return ManagedField(
        r.target,
        r.field,
        r.value,
        r.resource_version,
        r.written_at,
        r.human_value,
        r.human_seen_at,
        r.written_value,
        bool(r.original_recorded),
        r.original_value,
        r.uid,
        r.editor,
        r.editor_reverts or 0,
    )


class Store:
    """Records and reads scaleahead's state in SQLite or PostgreSQL.

    ``create=False`` is for commands that only read (or change existing rows): a SQLite file that
    does not exist, or has no tables, is then a ``UserError`` instead of a new, empty database.
    Whatever ``create`` says, a SQLite file that is not a database, is damaged, or holds other
    tables but no scaleahead schema version is refused before anything is written (docs/storage.md).
    """

    def __init__(
        self,
        url: str | None = None,
        upgrade: bool = True,
        forecast_interval_s: float = 120.0,
        create: bool = True,
        migration_lock_timeout_s: float | None = None,
    ) -> None:
        self.url = url or default_db_url()
        if self.url.startswith("sqlite:///~"):
            # the home folder, as a shell would read it (until 2026-12-07 a folder named "~" was made
            # in the working directory: a review)
            self.url = "sqlite:///" + str(Path(self.url.removeprefix("sqlite:///")).expanduser())
        self.create = create
        #: PostgreSQL: how long a migration waits for another session's table lock per try (None:
        #: the setting ``storage.migration_lock_timeout_s``, read from the environment when needed).
        self.migration_lock_timeout_s = migration_lock_timeout_s
        self.forecast_interval_s = forecast_interval_s
        #: Forecasts the prune functions delete per transaction (plans: a tenth as many), and the
        #: seconds they pause between two such batches on SQLite (``PRUNE_BATCH``, ``PRUNE_PAUSE_S``).
        self.prune_batch = PRUNE_BATCH
        self.prune_pause_s = PRUNE_PAUSE_S
        self._last_forecast: dict[int, float] = {}
        #: Workload key -> row id. Rows are never deleted or re-keyed, so the cache cannot go stale
        #: (a rolled-back insert is not cached: the id is stored only after a successful flush).
        self._workload_ids: dict[str, int] = {}
        path = _sqlite_file(self.url)
        if path is not None:
            self._check_sqlite_file(path)
        self.engine: Engine = _engine(self.url)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        if not self.shared_by_threads:  # until 2026-12-07 silently (a review's "noticed")
            log.warning(
                "The database %s is in memory: what is recorded is lost when the process exits, and "
                "each thread sees a database of its own (the daemon's HTTP server and webhook see "
                "nothing). Pass a file (sqlite:///PATH) or a PostgreSQL URL to keep it.",
                self.url,
                extra={"event": "database_in_memory"},
            )
        # Strings longer than their VARCHAR(n): refused before they are written, on both databases
        # (the ORM's writes here; the bulk inserts of forecasts and actions check their rows).
        event.listen(self._session, "before_flush", _check_flush_lengths)
        if upgrade:
            if not create:
                self._refuse_older_schema()
            self.upgrade()

    @classmethod
    def check_url(cls, url: str | None) -> None:
        """Refuse what ``Store(url)`` would refuse before it connects (a URL SQLAlchemy cannot use,
        a SQLite path that is a folder or a file that is not scaleahead's) without connecting,
        creating or migrating anything: a command that reads history for minutes asks this first, so
        a mistyped ``--db`` is said at once (``scaleahead retrain``)."""
        probe = cls.__new__(cls)
        probe.url, probe.create = url or default_db_url(), True
        path = _sqlite_file(probe.url)
        if path is not None and path.exists():
            probe._check_sqlite_file(path)
        elif path is not None:  # created later, in its folder or the folders made for it
            parent = path.absolute().parent
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
                raise UserError(
                    f"Cannot create the folder for database {probe.url}: {parent} is "
                    f"{'not a folder' if not parent.is_dir() else 'not writable'}.",
                    "Pass a writable --db URL or set SCALEAHEAD_DB_URL.",
                )
        _engine(probe.url).dispose()

    @property
    def shared_by_threads(self) -> bool:
        """Whether other threads see the same database through this store: False for an in-memory
        SQLite database, where each thread's connection is a database of its own (SQLAlchemy's
        ``SingletonThreadPool``); the actuator then applies a plan from one thread only."""
        return not isinstance(self.engine.pool, SingletonThreadPool)

    @property
    def overlapping_writes(self) -> bool:
        """Whether one thread's write transaction may run while other threads read and write the
        same database: PostgreSQL (row locks). Not SQLite: one writer at a time, and in WAL mode a
        transaction that read before another committed fails to write (``SQLITE_BUSY_SNAPSHOT``)
        instead of waiting. The actuator commits a plan's journal writes in groups, outside its
        lock, only where this holds (``Actuator._commit``)."""
        return self.engine.dialect.name != "sqlite"

    # -- schema ---------------------------------------------------------------------------------
    def _check_sqlite_file(self, path: Path) -> None:
        """Refuse a SQLite file that is not scaleahead's before SQLAlchemy opens it (its connect hook
        switches the file to WAL, a write): read it read-only first. A missing file is created
        (folder included) only if ``self.create``."""
        try:
            exists, is_dir = path.exists(), path.is_dir()
        except OSError:  # e.g. a folder we may not look into: the connection below says what is wrong
            return
        if is_dir:
            raise UserError(f"The database {self.url} is a folder, not a SQLite file.", "Point --db at a file.")
        if not exists:
            if not self.create:
                raise self._no_database(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"Cannot create the folder for database {self.url}: {exc.strerror}.",
                    "Pass a writable --db URL or set SCALEAHEAD_DB_URL.",
                ) from exc
            return
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return  # cannot open it even read-only: the engine's connection reports why
        try:
            names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.OperationalError:
            return  # locked, unreadable folder...: transient or environmental, reported by the engine
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            raise self._unreadable(exc) from exc
        finally:
            conn.close()
        tables = {n for n in names if not n.startswith("sqlite_")}
        if not tables and not self.create:
            raise self._no_database(path, "the file has no tables")
        self._check_tables(tables, sqlite=True)

    def _no_database(self, path: Path, why: str = "") -> UserError:
        return UserError(
            f"No scaleahead database at {path}{f' ({why})' if why else ''}.",
            f"Create it with `scaleahead db upgrade --db {self.url}` or check the path; nothing was created.",
        )

    def _unreadable(self, why: object) -> UserError:
        return UserError(
            f"{self.url} is not a readable SQLite database ({why}).",
            "Restore it from a backup or point --db at another file; nothing was written.",
        )

    def _check_tables(self, tables: set[str], sqlite: bool) -> None:
        """Without ``alembic_version``, refuse scaleahead tables (a partial or hand-made schema: which
        migrations ran is unknown), and in SQLite any table (another program's file)."""
        if "alembic_version" in tables:
            return
        shown = self._safe_url() if hasattr(self, "engine") else _hide_password(self.url)
        ours = sorted(tables & set(Base.metadata.tables))
        if ours:
            raise UserError(
                f"The database {shown} has scaleahead tables ({_few(ours)}) but no schema version (no "
                "alembic_version table), so which migrations ran is unknown.",
                "Restore it from a backup, or point --db at another database; nothing was written.",
            )
        if tables and sqlite:
            raise UserError(
                f"{shown} is not a scaleahead database: it has tables ({_few(sorted(tables))}) but no scaleahead "
                "schema version (no alembic_version table).",
                "Point --db at scaleahead's database, or at a new file to start one; nothing was written.",
            )

    def _corrupt(self, exc: DatabaseError) -> bool:
        """SQLite's "not a database" / "malformed" (a plain DatabaseError: not locked, not missing)."""
        return type(exc) is DatabaseError and self.engine.dialect.name == "sqlite"

    def _check_schema(self, conn: Any) -> None:
        """Before migrating: the database is empty, or scaleahead's at a revision this code knows.

        A PostgreSQL database may hold other applications' tables (normal); only scaleahead tables
        without ``alembic_version`` (a partial or hand-made schema) are refused there. A SQLite file
        is scaleahead's alone: any table without ``alembic_version`` is refused.
        """
        tables = set(sa_inspect(conn).get_table_names())
        if "alembic_version" in tables:
            current = MigrationContext.configure(conn).get_current_revision()
            ours = sorted(tables & set(Base.metadata.tables))
            if current is None and ours:
                # Migrating would create the tables again ("table ... already exists").
                raise UserError(
                    f"The database {self._safe_url()} has scaleahead tables ({_few(ours)}) but its schema "
                    "version is empty (no row in alembic_version), so which migrations ran is unknown: the "
                    "schema is damaged or was not made by scaleahead.",
                    "Restore it from a backup, or point --db at another database; nothing was written.",
                )
            known = self.revisions()
            if current is not None and current not in known:
                raise UserError(
                    f"The database {self._safe_url()} is at schema revision {current!r}, which this version "
                    f"of scaleahead does not know (it knows {', '.join(known)}).",
                    "It was written by a newer scaleahead (upgrade scaleahead; or, to roll back to this version, "
                    "downgrade the database with that newer scaleahead: `scaleahead db downgrade --revision "
                    f"{known[-1]}`, or restore the backup taken before the upgrade) or by another application "
                    "that uses Alembic (point --db at scaleahead's own database); nothing was written.",
                )
            return
        self._check_tables(tables, sqlite=self.engine.dialect.name == "sqlite")

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Turn "cannot connect / cannot write" into a ``UserError`` that says what to check."""
        try:
            yield
        except OperationalError as exc:
            if self.engine.dialect.name == "sqlite" and "locked" in str(exc.orig):
                raise UserError(
                    f"The database {self._safe_url()} is locked by another process (a running scaleahead, "
                    f"or another tool holding a write transaction): {exc.orig}.",
                    "Try again when that process is done (stop it for a schema upgrade); nothing was written.",
                ) from exc
            if self.engine.dialect.name == "sqlite":
                # There is no server to check (a review of 2026-12-07: a read-only folder was told
                # to check "that the server is running")
                raise UserError(
                    f"Cannot open or write the SQLite database {self._safe_url()}: {exc.orig}.",
                    "Check that the file and its folder exist and are writable by this user (SQLite also "
                    "writes -wal and -shm files beside it, so a read-only folder fails even to read), or give "
                    "--db a writable path.",
                ) from exc
            raise UserError(
                f"Cannot reach or write the database {self._safe_url()}: {exc.orig}.",
                "Check that the server is running and the URL (host, port, user, database) is right, "
                "or use the default SQLite database by leaving --db out.",
            ) from exc
        except DatabaseError as exc:
            if self._corrupt(exc):
                raise self._unreadable(exc.orig) from exc
            raise

    @staticmethod
    def revisions() -> list[str]:
        """The schema revisions, oldest first."""
        return [r.revision for r in reversed(list(ScriptDirectory.from_config(_alembic_config()).walk_revisions()))]

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to ``revision`` (from empty or from any earlier version).

        An unknown revision is a ``UserError`` that lists the known ones.
        """
        if revision != "head" and revision not in self.revisions():
            raise UserError(
                f"Unknown schema revision {revision!r}.",
                f"Use one of: head, {', '.join(self.revisions())} (docs/storage.md).",
            )
        self._check_encoding()
        if revision == "head" and self._at_head():
            self._check_complete()
            return  # the usual start: nothing to migrate, no lock taken

        def migrate(conn: Any) -> None:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)

        self._migrating(migrate)

    def _check_encoding(self) -> None:
        """A ``UserError`` for a PostgreSQL database whose encoding is not UTF8: reasons, outcomes and
        names hold text in any language, and a character the encoding cannot hold failed the
        transaction that wrote it, every time (the actuator retries a failed journal's outcomes, so
        one such outcome failed every journal after it; a review found it with LATIN1)."""
        if self.engine.dialect.name != "postgresql":
            return
        try:
            with self.engine.connect() as conn:
                encoding = str(conn.exec_driver_sql("SHOW server_encoding").scalar())
        except DatabaseError:
            return  # unreachable, a password refused...: the upgrade after this says what is wrong
        if encoding.upper() not in ("UTF8", "UTF-8"):
            raise UserError(
                f"The PostgreSQL database {self._safe_url()} has the encoding {encoding}: scaleahead stores text in "
                "any language (reasons, outcomes, policy and model names) and needs UTF8; nothing was created "
                "or migrated.",
                "Create its database with ENCODING 'UTF8' (CREATE DATABASE scaleahead ENCODING 'UTF8' TEMPLATE "
                "template0), point the URL at it, and copy any data over.",
            )

    def _migrating(self, migrate: Callable[[Any], None]) -> None:
        """Run ``migrate(connection)`` in one transaction that holds the migration lock, on a schema
        ``_check_schema`` accepts. Every migration of one call runs in that transaction (Alembic's
        ``begin_transaction`` joins it): a failure leaves the schema as it was.

        PostgreSQL: each try waits at most ``storage.migration_lock_timeout_s`` for a table lock
        that another session holds (``SET LOCAL lock_timeout``): the queued ACCESS EXCLUSIVE lock
        of an ``ALTER TABLE`` would otherwise hold up every reader of that table (the old replica's
        cycle) for as long as that session stays in its transaction. Lock timeouts are tried
        ``MIGRATION_LOCK_TRIES`` times, each logged with the sessions that hold locks on
        scaleahead's tables, then a ``UserError`` names them.
        """
        for attempt in range(1, MIGRATION_LOCK_TRIES + 1):
            try:
                with self._reachable():
                    try:
                        with self.engine.begin() as conn:
                            if conn.dialect.name == "sqlite":
                                # pysqlite runs DDL outside a transaction unless one is open: open it, so
                                # that a migration failing part-way leaves the schema as it was
                                # (PostgreSQL's DDL is transactional already), not half-made and failing
                                # every later start. IMMEDIATE: with the write lock from the start, a
                                # second process waits (busy timeout) and then reads the schema the first
                                # one made, instead of failing as "locked" when its read turns into a write.
                                conn.exec_driver_sql("BEGIN IMMEDIATE")
                            else:
                                self._lock_migrations(conn)
                                # after the advisory lock: another process's migration is waited for
                                ms = max(1, round(self._migration_lock_timeout_s() * 1000))
                                conn.execute(text("SELECT set_config('lock_timeout', :t, true)"), {"t": f"{ms}ms"})
                            self._check_schema(conn)
                            migrate(conn)
                    except OperationalError as exc:
                        if _lock_timed_out(exc):
                            raise _LockTimedOut(exc) from exc
                        raise
                return
            except _LockTimedOut as timed_out:
                lock = timed_out.exc
                holders = self._lock_holders()
                waited = self._migration_lock_timeout_s()
                statement = " ".join(str(lock.statement or "").split())[:100]
                if attempt == MIGRATION_LOCK_TRIES:
                    raise UserError(
                        f"Cannot migrate the schema of {self._safe_url()}: other sessions hold locks on its "
                        f"tables ({holders}); {MIGRATION_LOCK_TRIES} tries waited {waited:g} s each "
                        f"(storage.migration_lock_timeout_s) for `{statement}`. Nothing was migrated.",
                        "End that session (an idle-in-transaction psql, a stuck job: "
                        "SELECT pg_terminate_backend(PID)) or stop the old replica, then start again; "
                        "migrate from a one-off pod while no long transactions run (docs/operations.md).",
                    ) from lock
                log.warning(
                    "schema migration of %s waited %g s for locks other sessions hold on its tables (%s) "
                    "for `%s`; rolled back, trying again (%d of %d)",
                    self._safe_url(),
                    waited,
                    holders,
                    statement,
                    attempt + 1,
                    MIGRATION_LOCK_TRIES,
                )
                time.sleep(min(MIGRATION_LOCK_PAUSE_S, waited))

    def _migration_lock_timeout_s(self) -> float:
        if self.migration_lock_timeout_s is None:
            from scaleahead.settings import Settings

            self.migration_lock_timeout_s = Settings.from_env().storage.migration_lock_timeout_s
        return self.migration_lock_timeout_s

    def _lock_migrations(self, conn: Any) -> None:
        """Two replicas and the retraining CronJob starting at once: one migrates, the others wait
        here until it commits (said once in the log), then find the schema at head (each statement
        after this reads what is committed by then) and do nothing."""
        key = {"key": MIGRATION_LOCK}
        if conn.execute(text("SELECT pg_try_advisory_xact_lock(CAST(:key AS bigint))"), key).scalar():
            return
        log.warning("another process is migrating the schema of %s; waiting for it to finish", self._safe_url())
        conn.execute(text("SELECT pg_advisory_xact_lock(CAST(:key AS bigint))"), key)

    def _lock_holders(self) -> str:
        """The other sessions holding locks on scaleahead's tables (PostgreSQL), for a message:
        pid, application_name, state, since when its transaction and its last query run, the
        tables; "none found" if they are gone by now."""
        tables = [*Base.metadata.tables, "alembic_version"]
        query = text(
            "SELECT a.pid, a.application_name, a.state, a.xact_start, a.query_start, left(a.query, 60), "
            "array_agg(DISTINCT c.relname ORDER BY c.relname) "
            "FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.granted AND l.pid <> pg_backend_pid() "
            "AND l.relation IN (SELECT to_regclass(t) FROM unnest(CAST(:tables AS text[])) AS t) "
            "GROUP BY a.pid, a.application_name, a.state, a.xact_start, a.query_start, a.query ORDER BY a.pid"
        )
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(query, {"tables": tables}).all()
        except DatabaseError as exc:
            return f"which ones could not be read: {exc.orig}"
        if not rows:
            return "none found any more"

        def when(t: datetime | None) -> str:
            return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "?"

        return "; ".join(
            f"pid {pid} application_name {app or ''!r} {state or '?'} since {when(xact)} (last query at "
            f"{when(at)}: {' '.join(str(q or '').split())!r}) on {', '.join(rels)}"
            for pid, app, state, xact, at, q, rels in rows
        )

    def _check_complete(self) -> None:
        """At head, every table of the schema is there: one dropped by hand (or a backup restored in
        part) is a ``UserError`` now, not "no such table" in the middle of a command."""
        with self._reachable(), self.engine.connect() as conn:
            tables = set(sa_inspect(conn).get_table_names())
        missing = sorted(set(Base.metadata.tables) - tables)
        if missing:
            raise UserError(
                f"The database {self._safe_url()} is at schema revision {self.head_revision()!r} but has no "
                f"table {_few(missing)}: the schema is damaged (a table dropped by hand, or a backup restored "
                "in part), and migrating does not make it again.",
                "Restore it from a backup, or point --db at another database; nothing was written.",
            )

    def _refuse_older_schema(self) -> None:
        """For a store that does not create (``create=False``: a command that reads, or changes
        existing rows): a ``UserError`` when the schema is at an older revision this scaleahead
        knows, instead of migrating it. Until 2026-12-07 ``models list`` after a ``db downgrade``
        migrated the database back up, silently, and the older image then refused it (an operator
        audit). A database at head, without a schema or at an unknown revision goes on as before."""
        head = self.head_revision()
        try:
            with self.engine.connect() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
        except DatabaseError:
            return  # unreachable, damaged, locked...: the upgrade after this says what is wrong
        if current is None or current == head or current not in self.revisions():
            return
        raise UserError(
            f"The database {self._safe_url()} is at schema revision {current}, older than this scaleahead's "
            f"{head}: a command that does not create the database does not migrate it either (after a "
            "`db downgrade` that would undo it); nothing was changed.",
            f"Run `scaleahead db upgrade --db {self._safe_url()}` to migrate it (the daemon migrates at start too; "
            "one starting now may be migrating it: then try again in a minute), or use the scaleahead version "
            "whose schema it is.",
        )

    def _at_head(self) -> bool:
        """The schema is at the newest revision (read without a lock; a migration running
        elsewhere is not committed, so it reads as not at head)."""
        head = self.head_revision()
        try:
            with self.engine.connect() as conn:
                return head is not None and MigrationContext.configure(conn).get_current_revision() == head
        except DatabaseError:
            return False  # unreachable, damaged, locked...: the upgrade below says what is wrong

    def downgrade(self, revision: str) -> tuple[str | None, str | None]:
        """Migrate the schema back to ``revision`` (one of ``revisions()``, or ``base``: no tables),
        under the migration lock and the lock timeout, as ``upgrade``; returns the revisions before
        and after. A rollback runs it with the newer scaleahead, the one that knows the database's
        revision (an older one cannot: it has not the newer migrations' downgrade steps).

        ``UserError``: an unknown revision (the known ones listed), a database without a schema,
        or one at an older revision than ``revision`` (nothing to do; ``db upgrade`` goes forward).
        """
        known = self.revisions()
        if revision != "base" and revision not in known:
            raise UserError(
                f"Unknown schema revision {revision!r}.", f"Use one of: {', '.join(known)} (docs/storage.md)."
            )
        moved: list[str | None] = []

        def migrate(conn: Any) -> None:
            current = MigrationContext.configure(conn).get_current_revision()
            if current is None:
                raise UserError(
                    f"The database {self._safe_url()} has no scaleahead schema (no schema revision): there is "
                    "nothing to downgrade.",
                    "Check --db; nothing was written.",
                )
            if revision != "base" and known.index(current) < known.index(revision):
                raise UserError(
                    f"The database {self._safe_url()} is at schema revision {current!r}, older than "
                    f"{revision!r}: there is nothing to downgrade, and nothing was changed.",
                    "A downgrade only goes back; `scaleahead db upgrade --revision REV` goes forward.",
                )
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
            moved[:] = [current, MigrationContext.configure(conn).get_current_revision()]

        self._migrating(migrate)
        return moved[0], moved[1]

    def current_revision(self) -> str | None:
        with self._reachable(), self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    @staticmethod
    def head_revision() -> str | None:
        return ScriptDirectory.from_config(_alembic_config()).get_current_head()

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction. A SQLite file found damaged mid-way is a ``UserError``; other errors
        (locked, server gone: the daemon's loop retries those) pass through unchanged."""
        try:
            with self._session.begin() as s:
                yield s
        except BaseException as exc:
            self._rolled_back(exc)
            raise

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """``session`` without the ORM: one transaction on a Core connection, its errors told the
        same way. The journal's path (once an action): the ORM session's own bookkeeping cost about
        0.15 ms of CPU a transaction on PostgreSQL, 0.06 ms on SQLite (docs/benchmarks.md, "The
        journal on PostgreSQL")."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except BaseException as exc:
            self._rolled_back(exc)
            raise

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A Core connection for ONE read statement, its errors told as ``session``'s. On PostgreSQL
        without a transaction (autocommit: the statement alone, one round trip to the server instead
        of three with BEGIN and COMMIT; a database on another machine charges each,
        docs/benchmarks.md, "The journal's round trips"); on SQLite ``_transaction``'s."""
        if self.engine.dialect.name != "postgresql":
            with self._transaction() as conn:
                yield conn
            return
        try:
            with self._autocommit.connect() as conn:
                yield conn
        except BaseException as exc:
            self._rolled_back(exc)
            raise

    @functools.cached_property
    def _autocommit(self) -> Engine:
        """``engine`` in autocommit (``_read``): the same pool, each connection set back on return."""
        return self.engine.execution_options(isolation_level="AUTOCOMMIT")

    def _rolled_back(self, exc: BaseException) -> None:
        """After a transaction rolled back by ``exc``: raise what to tell instead of it (a damaged
        SQLite file, a value too long), or return to let ``exc`` pass unchanged."""
        # A workload id cached in this transaction names no row (and on SQLite the next new
        # workload may get it). Forget the cache; it is read again on next use.
        self._workload_ids.clear()
        if isinstance(exc, UnicodeEncodeError) and isinstance(exc.object, str):
            # a value the driver could not encode: one paragraph, not a traceback
            if "\ud800" <= exc.object[exc.start] <= "\udfff":
                raise NotUnicode(exc.object, exc.start) from exc
            raise UserError(
                f"The database {self._safe_url()} cannot hold {exc.object[exc.start]!r} (in "
                f"{_shown(exc.object)!r}): its encoding is {exc.encoding}, not UTF-8; nothing was recorded.",
                "Create scaleahead's database with ENCODING 'UTF8' (CREATE DATABASE scaleahead ENCODING 'UTF8' "
                "TEMPLATE template0) and move to it.",
            ) from exc
        if isinstance(exc, DatabaseError) and self._corrupt(exc):
            raise self._unreadable(exc.orig) from exc
        if isinstance(exc, SQLDataError) and getattr(exc.orig, "sqlstate", None) == "22001":
            # PostgreSQL's "value too long" for a value no check above saw: still one paragraph
            why = str(exc.orig).splitlines()[0]
            raise UserError(
                f"The database {self._safe_url()} refused a value: {why}; nothing was recorded.",
                "Shorten it (a policy's name, namespace, target or rolloutGroup; a model's name).",
            ) from exc

    def close(self) -> None:
        self.engine.dispose()

    # -- workloads ------------------------------------------------------------------------------
    def _workload_id(self, s: Session, ref: WorkloadRef) -> int:
        cached = self._workload_ids.get(ref.key)
        if cached is not None:
            return cached
        if not self._workload_ids:  # first use: load every known workload in one query
            self._workload_ids.update(
                {str(r[0]): int(r[1]) for r in s.execute(select(WorkloadRow.key, WorkloadRow.id))}
            )
            if ref.key in self._workload_ids:
                return self._workload_ids[ref.key]
        row = s.scalar(select(WorkloadRow).where(WorkloadRow.key == ref.key))
        if row is None:
            row = WorkloadRow(
                key=ref.key, kind=ref.kind, namespace=ref.namespace, name=ref.name, created_at=datetime.now(UTC)
            )
            s.add(row)
            s.flush()
        self._workload_ids[ref.key] = row.id  # forgotten if this transaction rolls back (session)
        return row.id

    def workloads(self) -> list[WorkloadRef]:
        with self.session() as s:
            return [WorkloadRef(r.kind, r.namespace, r.name) for r in s.scalars(select(WorkloadRow))]

    # -- forecasts ------------------------------------------------------------------------------
    def record_forecasts(
        self,
        forecasts: Sequence[Forecast],
        model_version_id: int | None = None,
        force: bool = False,
        versions: Mapping[WorkloadRef, int | None] | None = None,
    ) -> int:
        """Store forecasts (at most one per workload per ``forecast_interval_s`` unless ``force``),
        as made by ``model_version_id``, or by ``versions[workload]`` where given (a rollout's
        challenger arm)."""
        rows: list[dict[str, Any]] = []
        stamped: dict[int, float] = {}
        with self.session() as s:
            for fc in forecasts:
                wid = self._workload_id(s, fc.workload)
                last = stamped.get(wid, self._last_forecast.get(wid))
                if not force and last is not None and fc.origin - last < self.forecast_interval_s:
                    continue
                qs = fc.quantiles
                if isinstance(qs, QuantileRows):  # a row of a forecaster batch: already [K, horizon], ascending
                    keys = list(qs.levels)
                    raw = qs.batch[qs.row]
                else:
                    keys = sorted(qs)
                    raw = np.stack([qs[k] for k in keys])
                values, prefix = _compact(raw)
                _check_lengths(ForecastRow.__table__, {"model": fc.model})
                rows.append(
                    {
                        "workload_id": wid,
                        "origin": fc.origin,
                        "step_s": fc.step_s,
                        "quantiles": prefix + ",".join(f"{k:g}" for k in keys),
                        "model": fc.model,
                        "model_version_id": (
                            versions[fc.workload] if versions and fc.workload in versions else model_version_id
                        ),
                        "values_f16": values.tobytes(),
                    }
                )
                stamped[wid] = fc.origin
            if rows:  # one executemany, not one ORM object per forecast (1,000 workloads per cycle)
                s.execute(insert(ForecastRow), rows)
        self._last_forecast.update(stamped)  # only once committed
        return len(rows)

    def forecasts(self, ref: WorkloadRef, start: float = float("-inf"), end: float = float("inf")) -> list[Forecast]:
        with self.session() as s:
            wid = s.scalar(select(WorkloadRow.id).where(WorkloadRow.key == ref.key))
            if wid is None:
                return []
            rows = s.scalars(
                select(ForecastRow)
                .where(ForecastRow.workload_id == wid, ForecastRow.origin >= start, ForecastRow.origin < end)
                .order_by(ForecastRow.origin)
            )
            out = []
            for r in rows:
                wide = r.quantiles.startswith(F32_PREFIX)
                keys = [float(k) for k in r.quantiles.removeprefix(F32_PREFIX).split(",")]
                dtype = np.float32 if wide else np.float16
                arr = np.frombuffer(r.values_f16, dtype=dtype).reshape(len(keys), -1).astype(np.float64)
                out.append(Forecast(ref, r.origin, r.step_s, {k: arr[i] for i, k in enumerate(keys)}, r.model))
            return out

    # -- plans and the action journal -----------------------------------------------------------
    def record_plan(self, plan: Plan, source: str, state: str = "planned") -> tuple[int, list[int]]:
        """Store a plan and its actions (journal state ``state``). Returns the plan and action ids."""
        with self.session() as s:
            row = PlanRow(
                created_at=plan.created_at,
                source=source,
                fallbacks={k.key: v for k, v in plan.fallbacks.items()},
                notes={"notes": list(plan.notes)},
            )
            s.add(row)
            s.flush()
            if not plan.actions:
                return row.id, []
            # One executemany with RETURNING (SQLite >= 3.35, PostgreSQL), ids in parameter order.
            stmt = insert(ActionRow).returning(ActionRow.id, sort_by_parameter_order=True)
            values = [self._action_values(row.id, a, state, plan.created_at) for a in plan.actions]
            ids = [int(i) for i in s.scalars(stmt, values)]
            return row.id, ids

    @staticmethod
    def _action_values(plan_id: int, action: Action, state: str, now: float) -> dict[str, Any]:
        frm, to = action_endpoints(action)
        bounded = {"kind": action.kind, "target": action.target, "from_value": frm, "to_value": to}
        _check_lengths(ActionRow.__table__, {**bounded, "reason_code": action.reason.code})
        return {
            "plan_id": plan_id,
            "kind": action.kind,
            "target": action.target,
            "from_value": frm,
            "to_value": to,
            "reason_code": action.reason.code,
            "reason": storable_text(action.reason.message),
            "reason_details": json.loads(json.dumps(dict(action.reason.details), default=str)),
            "state": state,
            "outcome": "",
            "updated_at": now,
        }

    @staticmethod
    def _add_action(s: Session, plan_id: int, action: Action, state: str, now: float) -> int:
        frm, to = action_endpoints(action)
        details = json.loads(json.dumps(dict(action.reason.details), default=str))
        row = ActionRow(
            plan_id=plan_id,
            kind=action.kind,
            target=action.target,
            from_value=frm,
            to_value=to,
            reason_code=action.reason.code,
            reason=storable_text(action.reason.message),
            reason_details=details,
            state=state,
            outcome="",
            updated_at=now,
        )
        s.add(row)
        s.flush()
        return row.id

    def set_action_states(self, updates: Sequence[tuple[int, str, str]], now: float) -> None:
        """Journal many outcomes ``(action_id, state, outcome)`` in one transaction."""
        for _, state, _ in updates:
            if state not in ACTION_STATES:
                raise ValueError(f"unknown action state {state!r}")
        if not updates:
            return
        with self.session() as s:
            self._set_action_states(s, updates, now)

    @staticmethod
    def _set_action_states(s: Session, updates: Sequence[tuple[int, str, str]], now: float) -> None:
        Store._refuse_missing_actions(s, [u[0] for u in updates])
        # ORM bulk UPDATE by primary key: one executemany, no objects loaded.
        s.execute(
            update(ActionRow),
            [{"id": aid, "state": st, "outcome": storable_text(out), "updated_at": now} for aid, st, out in updates],
        )

    @staticmethod
    def _refuse_missing_actions(s: Session | Connection, ids: Sequence[int]) -> None:
        """``KeyError`` naming the first of ``ids`` that is not a journal row."""
        found: set[int] = set()
        for i in range(0, len(ids), 500):  # (SQLite's bound-parameter limit)
            found.update(s.scalars(select(ActionRow.id).where(ActionRow.id.in_(ids[i : i + 500]))))
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(missing[0])

    def journal(self, outcomes: Sequence[tuple[int, str, str]], fields: Sequence[FieldWrite], now: float) -> None:
        """In ONE transaction: the outcomes ``(action_id, state, outcome)`` (as ``set_action_states``,
        at ``now``) and the managed-field records ``fields`` (each as ``set_managed_field``, in
        order). The actuator writes a write-ahead intent this way together with the outcomes of the
        actions finished before it (docs/storage.md, "The journal's transactions")."""
        for _, state, _ in outcomes:
            if state not in ACTION_STATES:
                raise ValueError(f"unknown action state {state!r}")
        if not outcomes and not fields:
            return
        table = ManagedFieldRow.__table__
        for w in fields:  # on SQLite too, which stores a longer string (the ORM's flush checked a new record's)
            _check_lengths(
                table, {"target": w.target, "field": w.field, "resource_version": w.resource_version, "uid": w.uid}
            )
            # before either path sends anything, so that both refuse it the same way (the pipeline's
            # encoder raised it before the missing-row check, the Core path after: audit)
            _refuse_not_unicode((w.target, w.field, w.resource_version, w.uid))
        outcomes = [(aid, st, storable_text(out)) for aid, st, out in outcomes]
        if self._pipelined:
            self._journal_pipelined(outcomes, fields, now)
            return
        with self._transaction() as conn:
            # Core executemany statements built once (module level: their compiled form is cached),
            # on a Core connection (no ORM session or execution path): the actuator journals once an
            # action, so this is its per-action database cost (docs/benchmarks.md, "Cheaper journal,
            # quota arithmetic and reconcile" and "The journal on PostgreSQL").
            if outcomes:
                # by id (no existence SELECT): the actuator's own rows; one that is gone is still a
                # KeyError, found by the row count (and the transaction rolled back)
                result = conn.execute(
                    _OUTCOME_UPDATE, [{"aid": aid, "st": st, "out": out, "at": now} for aid, st, out in outcomes]
                )
                if int(getattr(result, "rowcount", -1)) not in (-1, len(outcomes)):
                    self._refuse_missing_actions(conn, [aid for aid, _, _ in outcomes])
            if fields:
                # every record in one executemany of upserts, in order: an UPDATE where the record
                # is there, else the INSERT of a workload's first write, one statement either way
                # (also where another process created the record meanwhile: ON CONFLICT is atomic).
                # Until 2026-12-06 an executemany UPDATE, and on a first write every write again
                # one by one: on PostgreSQL a plan's first writes cost three statements each.
                conn.execute(_FIELD_UPSERTS[conn.dialect.name], [_field_params(w) for w in fields])

    @functools.cached_property
    def _pipelined(self) -> bool:
        """Whether ``journal`` sends its transaction as one psycopg pipeline: PostgreSQL through
        psycopg 3 (the driver the documented URL names) on a libpq with pipeline mode (14 or later)."""
        if self.engine.dialect.name != "postgresql" or self.engine.dialect.driver != "psycopg":
            return False
        import psycopg

        # libpq before 14 (or psycopg's pure-Python build on one) has no pipeline mode: the Core
        # path then, where every journal failed (audit)
        return bool(psycopg.Pipeline.is_supported())

    def _journal_pipelined(
        self, outcomes: Sequence[tuple[int, str, str]], fields: Sequence[FieldWrite], now: float
    ) -> None:
        """``journal``'s transaction on PostgreSQL in ONE round trip instead of four: BEGIN, the
        outcomes' UPDATEs, the records' upserts and COMMIT go together in one psycopg pipeline and
        are answered together. Each statement used to wait for its answer before the next was sent
        (BEGIN, UPDATE, upserts, COMMIT), and a database on another machine charges a round trip
        for each (docs/benchmarks.md, "The journal's round trips"); until the evening of 2026-12-06
        the COMMIT waited for the UPDATE's row count (two round trips), where now each outcome's
        UPDATE fails on the server when it finds no row (``_checked_outcome_update``; measured in
        docs/benchmarks.md, "The journal in one round trip"). As on the Core path: a
        missing action row is a ``KeyError`` and nothing is written; the statements are the same
        ones (``_psycopg_sql``); a driver error is raised as SQLAlchemy raises it (an
        ``OperationalError`` for a server gone), the connection discarded if it is broken."""
        import psycopg
        from sqlalchemy.exc import DBAPIError

        rows: list[tuple[str, list[dict[str, Any]]]] = []
        for (sql, bound), params in (
            (_checked_outcome_update(), [{"aid": aid, "st": st, "out": out, "at": now} for aid, st, out in outcomes]),
            (_psycopg_sql(_FIELD_UPSERTS["postgresql"]), [_field_params(w) for w in fields]),
        ):
            if params:
                rows.append((sql, [{**bound, **p} for p in params]))
        _quiet_pipeline_ends()
        raw = self.engine.raw_connection()
        conn = cast(Any, raw.driver_connection)
        clean = False  # the connection idle, its pipeline closed: fit to go back to the pool
        failed: Any = None  # the driver's error, raised once the connection is back in the pool
        gone = False  # ... and the connection was broken
        try:
            try:
                conn.autocommit = True  # BEGIN and COMMIT are sent in the pipeline, by us
                # the one round trip: the pipeline's end sends everything and waits for the answers
                with conn.pipeline(), conn.cursor() as cur:
                    cur.execute("BEGIN")
                    for sql, params in rows:
                        cur.executemany(sql, params)
                    cur.execute("COMMIT")
                clean = True
            except psycopg.Error as exc:
                stopped = _interrupt_behind(exc)
                if stopped is not None:
                    # an interrupt while the pipeline's end waited: psycopg's "cannot exit pipeline
                    # mode while busy" replaced it (an audit saw Ctrl-C reported as a database
                    # error after the COMMIT); the connection is discarded (not clean)
                    raise stopped from None
                failed = exc
                gone = bool(self.engine.dialect.is_disconnect(cast(Any, exc), raw, None) or conn.closed)
                if gone:
                    # As SQLAlchemy does on a disconnect: the pool's other connections, as old, are
                    # replaced on their next checkout too (after a failover every one is dead; an
                    # audit saw each fail a journal in turn when only this one was dropped).
                    self.engine.pool._invalidate(raw, exc)
                else:
                    with suppress(psycopg.Error):  # an error aborts the transaction
                        conn.rollback()
                        clean = True
        except BaseException as exc:
            self._rolled_back(exc)
            raise
        finally:
            # Back to the pool only as it came: idle, no pipeline, autocommit off. Anything else (an
            # interrupt mid-pipeline, a failed reset) discards it: a connection left in autocommit
            # would make a later session's transaction a statement at a time (audit).
            if clean:
                try:
                    clean = (
                        conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                        and conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
                    )
                    if clean:
                        conn.autocommit = False
                except Exception:  # noqa: BLE001 - whatever it was, the connection is not reused
                    clean = False
            if not clean and raw.is_valid:
                raw.invalidate()
            raw.close()
        if failed is None:
            return
        try:
            if outcomes and not gone:
                # A missing action row is the KeyError whatever else failed, as on the Core path,
                # which runs the outcomes' UPDATE first: here an upsert's value the driver cannot
                # send fails before the server answers the UPDATE (audit). Also where the server
                # refused the UPDATE for it (``_checked_outcome_update``'s division by zero). Run
                # with the pipeline's connection back in the pool (it took a second one: audit).
                with self._transaction() as check:
                    self._refuse_missing_actions(check, [aid for aid, _, _ in outcomes])
            if isinstance(failed, psycopg.errors.DivisionByZero):
                raise KeyError(outcomes[0][0]) from None  # (a row gone and back meanwhile: nothing written)
            raise DBAPIError.instance(
                None, None, failed, psycopg.Error, connection_invalidated=gone, dialect=self.engine.dialect
            ) from failed
        except BaseException as exc:
            self._rolled_back(exc)
            raise

    def set_action_state(
        self, action_id: int, state: str, outcome: str, now: float, only_from: str | None = None
    ) -> bool:
        """Journal an action's outcome. With ``only_from``, only if its state is still that one (one
        conditional UPDATE: another process may have journaled it meanwhile); returns whether it was
        written."""
        if only_from is not None:
            return action_id in self.set_action_states_from([(action_id, state, outcome)], now, only_from)
        if state not in ACTION_STATES:
            raise ValueError(f"unknown action state {state!r}")
        with self.session() as s:
            row = s.get(ActionRow, action_id)
            if row is None:
                raise KeyError(action_id)
            row.state, row.outcome, row.updated_at = state, storable_text(outcome), now
            return True

    def set_action_states_from(self, updates: Sequence[tuple[int, str, str]], now: float, only_from: str) -> set[int]:
        """``set_action_state(id, state, outcome, now, only_from)`` for each of ``updates``, in ONE
        transaction (reconciliation writes its rows' states this way, a few hundred at a time):
        each row only if its state is still ``only_from``; returns the ids written."""
        for _, state, _ in updates:
            if state not in ACTION_STATES:
                raise ValueError(f"unknown action state {state!r}")
        written: set[int] = set()
        if not updates:
            return written
        updates = [(aid, st, storable_text(out)) for aid, st, out in updates]
        if self.engine.dialect.name == "postgresql":
            # one statement a few hundred rows (reconcile's batch): one round trip, where a row's
            # own statement cost one each (docs/benchmarks.md, "The journal's round trips")
            # A row given twice: its second update in a later statement (of the same transaction),
            # which sees the first's write, as one by one did (one statement would apply either).
            rounds: list[list[tuple[int, str, str]]] = []
            seen: Counter[int] = Counter()
            for u in updates:
                if seen[u[0]] == len(rounds):
                    rounds.append([])
                rounds[seen[u[0]]].append(u)
                seen[u[0]] += 1
            with self._transaction() as conn:
                for chunk in (r[i : i + 500] for r in rounds for i in range(0, len(r), 500)):
                    written.update(conn.execute(_outcome_updates_from(chunk, now, only_from)).scalars())
            return written
        with self.session() as s:
            conn = s.connection()
            for aid, state, outcome in updates:
                params = {"aid": aid, "st": state, "out": outcome, "at": now, "from_state": only_from}
                if int(getattr(conn.execute(_OUTCOME_UPDATE_FROM, params), "rowcount", 0) or 0) > 0:
                    written.add(aid)
        return written

    def actions(
        self,
        plan_id: int | None = None,
        state: str | None = None,
        limit: int = 1000,
        target: str | None = None,
        since: float | None = None,
        source: str | None = None,
    ) -> list[StoredAction]:
        """The newest ``limit`` journaled actions, newest first; optionally of one plan, one state,
        one ``target`` (the action's full target, ``Deployment/shop/checkout``, or ``shop/checkout``
        for any of ``TARGET_KINDS``), last updated at or after ``since`` (epoch s), or of plans from
        one ``source`` (``StoredAction.source``)."""
        with self.session() as s:
            q = (
                select(ActionRow, PlanRow.source)
                .join(PlanRow, PlanRow.id == ActionRow.plan_id)
                .order_by(ActionRow.id.desc())
                .limit(limit)
            )
            if source is not None:
                q = q.where(PlanRow.source == source)
            if plan_id is not None:
                q = q.where(ActionRow.plan_id == plan_id)
            if state is not None:
                q = q.where(ActionRow.state == state)
            if target is not None:  # exact, case-sensitive on every database (no LIKE: SQLite's ignores case)
                q = q.where(ActionRow.target.in_([target, *(f"{kind}/{target}" for kind in TARGET_KINDS)]))
            if since is not None:
                q = q.where(ActionRow.updated_at >= since)
            return [
                StoredAction(
                    r.id,
                    r.plan_id,
                    r.kind,
                    r.target,
                    r.from_value,
                    r.to_value,
                    r.reason_code,
                    r.reason,
                    r.state,
                    r.outcome,
                    r.updated_at,
                    dict(r.reason_details or {}),
                    src,
                )
                for r, src in s.execute(q)
            ]

    # -- fields the actuator manages (human-edit detection) ---------------------------------------
    def managed_field(self, target: str) -> ManagedField | None:
        """The record of ``target`` (None: none). A Core read (no ORM session): reconciliation reads
        one per row it decides (until 2026-12-06 an ORM read, about 0.17 ms of CPU a row); on
        PostgreSQL one round trip (``_read``)."""
        with self._read() as conn:
            r = conn.execute(_MANAGED_BY_TARGET, {"t": target}).first()
            return None if r is None else _managed(r)

    def managed_fields_of(self, targets: Collection[str]) -> dict[str, ManagedField | None]:
        """The records of ``targets`` in one transaction: target -> record (None: none)."""
        wanted = sorted(set(targets))
        found: dict[str, ManagedField | None] = dict.fromkeys(wanted)
        if not wanted:
            return found
        with self.session() as s:
            for i in range(0, len(wanted), 500):  # (SQLite's bound-parameter limit)
                q = select(ManagedFieldRow).where(ManagedFieldRow.target.in_(wanted[i : i + 500]))
                found.update((r.target, _managed(r)) for r in s.scalars(q))
        return found

    def managed_fields(self) -> list[ManagedField]:
        """Every field the actuator has written (one row per target), by target."""
        with self.session() as s:
            return [_managed(r) for r in s.scalars(select(ManagedFieldRow).order_by(ManagedFieldRow.target))]

    def forget_managed_field(self, target: str) -> None:
        """Drop the record of ``target`` (it is no longer scaleahead's to manage)."""
        with self.session() as s:
            r = s.get(ManagedFieldRow, target)
            if r is not None:
                s.delete(r)

    def set_managed_field(
        self,
        target: str,
        field: str,
        value: int,
        resource_version: str,
        now: float,
        written: bool = False,
        original: int | None | Unrecorded = UNRECORDED,
        uid: str = "",
    ) -> None:
        """Record what we just wrote (or are about to: an intent); clears any human edit seen before.
        ``written``: the field is known to hold ``value`` because scaleahead wrote it (``written_value``).
        ``original``: what the field held before scaleahead's first write (None: not set), recorded
        only if the target has no record yet (a later first write of a forgotten record records anew).
        ``uid``: the object's ``metadata.uid`` (empty: not known, the recorded one is kept)."""
        with self.session() as s:
            self._set_managed_field(s, FieldWrite(target, field, value, resource_version, now, written, original, uid))

    @staticmethod
    def _set_managed_field(s: Session, w: FieldWrite) -> None:
        r = s.get(ManagedFieldRow, w.target)
        if r is None:
            r = ManagedFieldRow(target=w.target, original_recorded=False)
            if not isinstance(w.original, Unrecorded):
                r.original_recorded, r.original_value = True, w.original
            s.add(r)
        r.field, r.value, r.resource_version, r.written_at = w.field, w.value, w.resource_version, w.now
        r.human_value, r.human_seen_at = None, None
        if w.written:
            r.written_value = w.value
        if w.uid:
            r.uid = w.uid

    def set_managed_uid(self, target: str, uid: str) -> None:
        """Record the UID of ``target``'s object (read live) on a record that has none yet."""
        with self.session() as s:
            r = s.get(ManagedFieldRow, target)
            if r is not None and not r.uid and uid:
                r.uid = uid

    def set_human_edit(
        self, target: str, value: int, now: float, editor: str | None = None, reverts: int | None = None
    ) -> None:
        """Record that someone else set ``target`` to ``value`` (seen at ``now``); ``editor``/``reverts``
        given: who (a field manager, None: not named) and how many of scaleahead's writes in a row it undid."""
        with self.session() as s:
            r = s.get(ManagedFieldRow, target)
            if r is None:
                raise KeyError(target)
            r.human_value, r.human_seen_at = value, now
            if reverts is not None:
                r.editor, r.editor_reverts = editor, reverts

    def reset_editor(self, target: str) -> None:
        """Forget who undid scaleahead's writes to ``target`` (scaleahead's value stood)."""
        with self.session() as s:
            r = s.get(ManagedFieldRow, target)
            if r is not None:
                r.editor, r.editor_reverts = None, 0

    # -- risk adaptation (planner.risk) -------------------------------------------------------------
    def risk_factors(self) -> dict[str, int]:
        """The risk adaptation's step ``k`` per workload key (``Kind/namespace/name``)."""
        with self.session() as s:
            return {r.workload: r.k for r in s.scalars(select(RiskFactorRow))}

    def risk_factor_records(self) -> dict[str, tuple[int, float, str | None]]:
        """Per workload key: ``(k, sloRisk planned with, fingerprint)`` (``planner.risk.RiskBook.restore``)."""
        with self.session() as s:
            return {r.workload: (r.k, r.slo_risk, r.fingerprint) for r in s.scalars(select(RiskFactorRow))}

    def set_risk_factors(
        self, factors: Mapping[str, tuple[int, float] | tuple[int, float, str | None]], now: float
    ) -> None:
        """Record ``{workload key: (k, sloRisk planned with[, fingerprint])}``; ``k`` 0 removes the row
        (the policy's own weight)."""
        if not factors:
            return
        with self.session() as s:
            for key, value in factors.items():
                k, weight = value[0], value[1]
                r = s.get(RiskFactorRow, key)
                if k <= 0:
                    if r is not None:
                        s.delete(r)
                    continue
                if r is None:
                    r = RiskFactorRow(workload=key)
                    s.add(r)
                r.k, r.slo_risk, r.updated_at = int(k), float(weight), float(now)
                r.fingerprint = value[2] if len(value) > 2 else None

    def prune_risk_factors(self, before: float, keep: Callable[[str], bool]) -> int:
        """Delete the recorded steps last written before ``before`` (epoch s) whose workload key
        ``keep`` refuses (the daemon keeps its policies' and other shards'). Returns the count."""
        with self.session() as s:
            rows = list(s.scalars(select(RiskFactorRow).where(RiskFactorRow.updated_at < before)))
            gone = [r for r in rows if not keep(r.workload)]
            for r in gone:
                s.delete(r)
            return len(gone)

    def count_plans(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(func.count()).select_from(PlanRow)) or 0)

    # -- model registry -------------------------------------------------------------------------
    def register_model(
        self,
        name: str,
        family: str,
        *,
        data_source: str = "",
        data_start: float | None = None,
        data_end: float | None = None,
        step_s: float | None = None,
        hyperparams: dict[str, Any] | None = None,
        metrics: dict[str, Any] | None = None,
        artifact_path: str = "",
        artifact_sha256: str = "",
        status: str = "candidate",
        artifact: bytes | None = None,
        created_at: float | None = None,
    ) -> int:
        """Register a model version; ``artifact`` (its checkpoint's bytes) is stored with it, so that
        any replica can load it (``model_artifact``) whatever happened to ``artifact_path``.
        ``created_at`` (epoch s; default now) is the caller's clock: the daemon's own, virtual in
        ``run --virtual``, so that retention (``prune_model_checkpoints``) counts ages on one clock."""
        if artifact is not None:
            digest = hashlib.sha256(artifact).hexdigest()
            if artifact_sha256 and artifact_sha256 != digest:
                raise ValueError("artifact_sha256 does not match the artifact's bytes")
            artifact_sha256 = digest
        with _one_champion(f"The new model version {name!r}", lambda: family), self.session() as s:
            row = ModelVersionRow(
                name=name,
                family=family,
                # a champion is registered as a candidate, then promoted: the family's other champion retires
                status="candidate" if status in CHAMPION_STATUSES else status,
                created_at=datetime.now(UTC) if created_at is None else datetime.fromtimestamp(created_at, UTC),
                data_source=data_source,
                data_start=data_start,
                data_end=data_end,
                step_s=step_s,
                hyperparams=hyperparams or {},
                metrics=metrics or {},
                artifact_path=artifact_path,
                artifact_sha256=artifact_sha256,
            )
            s.add(row)
            s.flush()
            if artifact is not None:
                s.add(ModelArtifactRow(model_id=row.id, data=artifact, sha256=artifact_sha256))
            if status in CHAMPION_STATUSES:
                self._make_champion(s, row.id, time.time() if created_at is None else created_at, status)
            return row.id

    def models_with_artifacts(self) -> set[int]:
        """Ids of the model versions whose checkpoint is stored in the database."""
        with self.session() as s:
            return set(s.scalars(select(ModelArtifactRow.model_id)))

    def model_artifact(self, model_id: int) -> bytes | None:
        """The checkpoint bytes stored with a model version (None: none stored), checked against
        their SHA-256; a mismatch is a ``DataError`` (a corrupt row must not be loaded)."""
        with self.session() as s:
            row = s.get(ModelArtifactRow, model_id)
            if row is None:
                return None
            data = bytes(row.data)
            if hashlib.sha256(data).hexdigest() != row.sha256:
                raise DataError(
                    f"The stored checkpoint of model version {model_id} does not match its SHA-256.",
                    "Retrain or re-register the model (scaleahead train, scaleahead retrain).",
                )
            return data

    def set_model_status(self, model_id: int, status: str) -> None:
        """Set a version's status; a champion status (``CHAMPION_STATUSES``) makes it the champion of
        its family as ``make_champion`` does (the family's other champion retires)."""
        with _one_champion(f"Model version {model_id}", lambda: self.model(model_id).family), self.session() as s:
            if status in CHAMPION_STATUSES:
                self._make_champion(s, model_id, time.time(), status)
                return
            row = s.get(ModelVersionRow, model_id)
            if row is None:
                raise UserError(f"No model version {model_id}.", "See `scaleahead models list`.")
            row.status = status

    def make_champion(self, model_id: int, now: float | None = None) -> list[int]:
        """Make a version the champion of its family, in one transaction: every other ``champion``
        or ``production`` version of that family becomes ``retired``, with ``retired_at`` = ``now``
        (epoch s; default the wall clock) in its metrics. Returns the retired ids.

        Promotions in one family are serialized (``_make_champion``): of two at once, the one that
        commits second retires the first's champion, so the family always has one champion, the
        one promoted last. A writer that does not wait for that (the index refuses a second
        champion) gets ``ChampionChanged`` (a ``UserError``), nothing recorded."""
        with _one_champion(f"Model version {model_id}", lambda: self.model(model_id).family), self.session() as s:
            return self._make_champion(s, model_id, time.time() if now is None else now)

    @staticmethod
    def _retire(row: ModelVersionRow, now: float) -> None:
        row.status = "retired"
        row.metrics = {**(row.metrics or {}), "retired_at": now}

    @staticmethod
    def _lock_family(s: Session, model_id: int, family: str) -> None:
        """Wait for any other promotion in ``family`` to commit, and keep the next one waiting until
        this transaction ends. PostgreSQL: an advisory lock on the family. SQLite: the database's
        write lock (taken by a write that changes nothing; a single writer at a time). Reads after
        it see what the other promotion committed (PostgreSQL reads each statement afresh)."""
        if s.get_bind().dialect.name == "postgresql":
            s.execute(
                text("SELECT pg_advisory_xact_lock(CAST(:key AS integer), hashtext(:family))"),
                {"key": CHAMPION_LOCK, "family": family},
            )
        else:
            s.execute(text("UPDATE model_versions SET status = status WHERE id = :id"), {"id": model_id})

    @staticmethod
    def _make_champion(s: Session, model_id: int, now: float, status: str = "champion") -> list[int]:
        row = s.get(ModelVersionRow, model_id)
        if row is None:
            raise UserError(f"No model version {model_id}.", "See `scaleahead models list`.")
        Store._lock_family(s, model_id, row.family)
        others = s.scalars(
            select(ModelVersionRow)
            .where(
                ModelVersionRow.family == row.family,
                ModelVersionRow.id != model_id,
                ModelVersionRow.status.in_(CHAMPION_STATUSES),
            )
            .execution_options(populate_existing=True)
        ).all()
        for other in others:
            Store._retire(other, now)
        s.flush()  # the retirements first: the one-champion index checks each row as it is written
        row.status = status
        s.flush()
        return [o.id for o in others]

    def models(self) -> list[ModelVersion]:
        with self.session() as s:
            return [_model(r) for r in s.scalars(select(ModelVersionRow).order_by(ModelVersionRow.id))]

    def champion(self, family: str) -> ModelVersion | None:
        """The champion of ``family``: its newest version with a champion status
        (``CHAMPION_STATUSES``), or None. One row read, through the one-champion index, however
        many versions the registry holds (the daemon asks every minute; ``models()`` reads them all)."""
        with self.session() as s:
            row = s.scalars(
                select(ModelVersionRow)
                .where(
                    ModelVersionRow.family == family,
                    # literal values: SQLite uses the partial index only when the query's terms match its own
                    ModelVersionRow.status.in_(bindparam("champion", CHAMPION_STATUSES, literal_execute=True)),
                )
                .order_by(ModelVersionRow.id.desc())
                .limit(1)
            ).first()
            return _model(row) if row is not None else None

    def model(self, model_id: int) -> ModelVersion:
        with self.session() as s:
            row = s.get(ModelVersionRow, model_id)
            if row is None:
                raise UserError(f"No model version {model_id}.", "See `scaleahead models list`.")
            return _model(row)

    # -- rollouts -------------------------------------------------------------------------------
    def create_rollout(
        self,
        group: str,
        mode: str,
        champion: str,
        challenger: str,
        now: float,
        share: float = 0.0,
        params: dict[str, Any] | None = None,
        results: dict[str, Any] | None = None,
        supersede: tuple[StoredRollout, dict[str, Any]] | None = None,
    ) -> int:
        """A new running rollout of ``group`` (with ``results`` from the start, e.g. retraining's
        marker); returns its id.

        ``supersede``: a running rollout of the group as the caller read it, and the results to
        record with it; it becomes ``superseded`` in the same transaction as the new one is created,
        so neither is recorded without the other, and only if it is still as read (else a
        ``UserError``, ``RolloutChanged``). Raises ``RolloutRunning`` when another rollout of
        ``group`` is running (the partial unique index on running rollouts per group, migration
        0009_one_running: two starts at once cannot both succeed)."""
        try:
            with self.session() as s:
                if supersede is not None:
                    seen, seen_results = supersede
                    self._change_rollout(s, seen, now, state="superseded", results=seen_results)
                row = RolloutRow(
                    group=group,
                    mode=mode,
                    state="running",
                    champion=champion,
                    challenger=challenger,
                    share=share,
                    started_at=now,
                    updated_at=now,
                    params=params or {},
                    results=results or {},
                )
                s.add(row)
                s.flush()
                return row.id
        except IntegrityError as exc:
            raise RolloutRunning(group) from exc

    @staticmethod
    def _change_rollout(s: Session, seen: StoredRollout, now: float, **values: Any) -> None:
        """Write ``values`` to the rollout ``seen`` only if its row is still as the caller read it:
        running, at the same share, not updated since. A decision made from a stale read (an
        operator's abort, a retraining's supersede, a promotion or another evaluation committed
        in between) would otherwise undo that change or drop its history entry."""
        done = s.execute(
            update(RolloutRow)
            .where(
                RolloutRow.id == seen.id,
                RolloutRow.state == "running",
                RolloutRow.share == seen.share,
                RolloutRow.updated_at == seen.updated_at,
            )
            .values(updated_at=now, **values)
            .execution_options(synchronize_session=False)
        )
        if getattr(done, "rowcount", 0) != 1:
            row = s.get(RolloutRow, seen.id)
            raise RolloutChanged(seen.id, row.state if row is not None else "deleted")

    def promote_rollout(
        self,
        seen: StoredRollout,
        now: float,
        challenger_model: int | None,
        champion_model: int | None,
        results: dict[str, Any] | None = None,
    ) -> None:
        """Mark a rollout promoted and, when its arms are model versions, make the challenger the
        champion of its family and retire the family's others (``champion_model`` among them when
        it is of that family; one of another family stays champion): one transaction, so the
        rollout and the registry never disagree (a promotion half-recorded would be undone by the
        daemon following the registry).
        Only if the rollout is still as ``seen`` (running, same share, not updated since): else a
        ``RolloutChanged`` (a ``UserError``) and nothing is recorded; ``ChampionChanged`` likewise
        if the challenger's family got another champion from a writer that did not wait its turn."""
        challenger = challenger_model if challenger_model is not None else -1
        with _one_champion(f"Model version {challenger}", lambda: self.model(challenger).family), self.session() as s:
            values: dict[str, Any] = {"state": "promoted", "share": 1.0}
            if results is not None:
                values["results"] = results
            self._change_rollout(s, seen, now, **values)
            if challenger_model is not None and s.get(ModelVersionRow, challenger_model) is not None:
                # its family's other champions retire (the rollout's champion among them when it is
                # of that family). A champion of another family stays: production runs
                # forecast.model's family, and until 2026-12-07 a promotion over it retired its
                # champion, so a restart fell back to a baseline (an operator audit).
                self._make_champion(s, challenger_model, now)

    def update_rollout(
        self,
        seen: StoredRollout,
        now: float,
        *,
        state: str | None = None,
        share: float | None = None,
        results: dict[str, Any] | None = None,
    ) -> None:
        """Record a running rollout's new state, share or results, only if it is still as ``seen``
        (running, same share, not updated since); else a ``RolloutChanged`` (a ``UserError``) and
        nothing is recorded: the caller's decision was made on what is no longer so."""
        values: dict[str, Any] = {}
        if state is not None:
            values["state"] = state
        if share is not None:
            values["share"] = share
        if results is not None:
            values["results"] = results
        with self.session() as s:
            self._change_rollout(s, seen, now, **values)

    def rollouts(
        self, group: str | None = None, state: str | None = None, ids: Collection[int] | None = None
    ) -> list[StoredRollout]:
        """Rollouts by id, oldest first: all of them, or those of ``group``, in ``state``, among
        ``ids`` (by primary key: the daemon's once-a-minute read of the few it follows)."""
        with self.session() as s:
            q = select(RolloutRow).order_by(RolloutRow.id)
            if group is not None:
                q = q.where(RolloutRow.group == group)
            if state is not None:
                q = q.where(RolloutRow.state == state)
            if ids is not None:
                if not ids:
                    return []
                q = q.where(RolloutRow.id.in_(sorted(set(ids))))
            return [_rollout(r) for r in s.scalars(q)]

    def last_promoted_rollout(self) -> StoredRollout | None:
        """The rollout promoted last (by when it was last updated, then id), or None: one row read,
        whatever the size of the table (never pruned), for a start's check of what it runs."""
        with self.session() as s:
            row = s.scalars(
                select(RolloutRow)
                .where(RolloutRow.state == "promoted")
                .order_by(RolloutRow.updated_at.desc(), RolloutRow.id.desc())
                .limit(1)
            ).first()
            return _rollout(row) if row is not None else None

    def rollout(self, rollout_id: int) -> StoredRollout:
        """One rollout by id (a ``UserError`` if there is none)."""
        with self.session() as s:
            row = s.get(RolloutRow, rollout_id)
            if row is None:
                raise UserError(f"No rollout {rollout_id}.", "See `scaleahead rollout status`.")
            return _rollout(row)

    # -- pod steers -----------------------------------------------------------------------------
    def add_steer(
        self, namespace: str, owner_kind: str, owner_name: str, evicted_pod: str, node: str, now: float, ttl_s: float
    ) -> int:
        """Record a pending steer that expires ``ttl_s`` after ``now``; returns its id."""
        with self.session() as s:
            row = PodSteerRow(
                namespace=namespace,
                owner_kind=owner_kind,
                owner_name=owner_name,
                evicted_pod=evicted_pod,
                node=node,
                created_at=now,
                expires_at=now + ttl_s,
                state="pending",
                consumed_by="",
                updated_at=now,
            )
            s.add(row)
            s.flush()
            return row.id

    def consume_steer(
        self,
        namespace: str,
        owner_kind: str,
        owner_name: str,
        pod: str,
        now: float,
        deadline: float | None = None,
    ) -> StoredSteer | None:
        """Take the oldest unexpired pending steer of the owner for ``pod``, or None.

        The conditional UPDATE (``state = 'pending'``) makes consumption atomic: of two webhook
        replicas racing for one steer, exactly one gets it. ``deadline`` (``time.monotonic()``):
        past it, nothing is committed and None is returned. The webhook's answer is dropped by the
        API server after its timeout: a steer taken after that would be marked consumed for a pod
        that was created unsteered. On PostgreSQL lock and statement waits are bounded by the time
        left; SQLite's busy wait is checked against the deadline before the commit.
        """
        try:
            return self._consume_steer(namespace, owner_kind, owner_name, pod, now, deadline)
        except _TooLate:
            return None  # rolled back: the steer stays pending
        except OperationalError as exc:
            # PostgreSQL's lock or statement timeout (set from the deadline) cancelled it: the
            # same as running out of time, not a database failure (two replicas racing for one
            # steer wait on each other's row lock).
            if deadline is not None and getattr(exc.orig, "sqlstate", None) in ("57014", "55P03"):
                return None
            raise

    def _consume_steer(
        self, namespace: str, owner_kind: str, owner_name: str, pod: str, now: float, deadline: float | None
    ) -> StoredSteer | None:
        for _ in range(3):
            with self.session() as s:
                if deadline is not None and self.engine.dialect.name == "postgresql":
                    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                    s.execute(text(f"SET LOCAL lock_timeout = {left_ms}"))
                    s.execute(text(f"SET LOCAL statement_timeout = {left_ms}"))
                row = s.scalars(
                    select(PodSteerRow)
                    .where(
                        PodSteerRow.namespace == namespace,
                        PodSteerRow.owner_kind == owner_kind,
                        PodSteerRow.owner_name == owner_name,
                        PodSteerRow.state == "pending",
                        PodSteerRow.expires_at > now,
                    )
                    .order_by(PodSteerRow.id)
                    .limit(1)
                ).first()
                if row is None:
                    return None
                taken = s.execute(
                    update(PodSteerRow)
                    .where(PodSteerRow.id == row.id, PodSteerRow.state == "pending")
                    .values(state="consumed", consumed_by=pod[:253], updated_at=now)
                    .execution_options(synchronize_session=False)
                )
                if getattr(taken, "rowcount", 0) == 1:
                    if deadline is not None and time.monotonic() > deadline:
                        raise _TooLate  # too late to be answered: roll back
                    return replace(_steer(row), state="consumed", consumed_by=pod[:253], updated_at=now)
        return None

    def set_steer_state(self, steer_id: int, state: str, now: float) -> None:
        """Move a pending steer to ``state`` (e.g. ``cancelled`` when the eviction was refused)."""
        if state not in STEER_STATES:
            raise ValueError(f"unknown steer state {state!r}")
        with self.session() as s:
            s.execute(
                update(PodSteerRow)
                .where(PodSteerRow.id == steer_id, PodSteerRow.state == "pending")
                .values(state=state, updated_at=now)
            )

    def expire_steers(self, now: float) -> list[StoredSteer]:
        """Mark pending steers whose time ran out as ``expired`` and return them (to be reported)."""
        with self.session() as s:
            rows = list(
                s.scalars(
                    select(PodSteerRow)
                    .where(PodSteerRow.state == "pending", PodSteerRow.expires_at <= now)
                    .order_by(PodSteerRow.id)
                )
            )
            for r in rows:
                r.state = "expired"
                r.updated_at = now
            return [_steer(r) for r in rows]

    def steers(self, state: str | None = None, limit: int = 1000) -> list[StoredSteer]:
        """The newest ``limit`` steers (oldest first), optionally in one state."""
        with self.session() as s:
            q = select(PodSteerRow).order_by(PodSteerRow.id.desc()).limit(limit)
            if state is not None:
                q = q.where(PodSteerRow.state == state)
            return [_steer(r) for r in reversed(list(s.scalars(q)))]

    # -- retention ------------------------------------------------------------------------------
    def _pause_between_batches(self) -> None:
        """On SQLite, let a waiting writer take the write lock between two prune batches (its busy
        handler looks again at most every 100 ms); PostgreSQL locks rows, so it does not wait."""
        if self.engine.dialect.name == "sqlite" and self.prune_pause_s > 0:
            time.sleep(self.prune_pause_s)

    def prune_forecasts(self, before: float) -> int:
        """Delete stored forecasts whose origin is before ``before`` (epoch s). Returns the count.

        In batches of ``prune_batch`` rows, each its own transaction, found through the index on
        ``origin`` (migration 0012_forecast_origin), with a pause between batches on SQLite: the
        write lock is held briefly and the loop's writes go on meanwhile. Until 2026-12-06 one
        transaction deleted them all (about 100 s for one day of 10,000 workloads on SQLite, and the
        loop's writes failed with "database is locked")."""
        return self._delete_in_batches(ForecastRow, ForecastRow.origin < before)

    def _delete_in_batches(self, row: Any, condition: Any) -> int:
        """Delete ``row``'s rows where ``condition`` holds, ``prune_batch`` at a time, each batch its
        own transaction with a pause between batches on SQLite. Returns the count."""
        total = 0
        while True:
            with self.session() as s:
                old = select(row.id).where(condition).limit(self.prune_batch)
                result = s.execute(delete(row).where(row.id.in_(old)))
                n = int(getattr(result, "rowcount", 0) or 0)
            total += n
            if n < self.prune_batch:
                return total
            self._pause_between_batches()

    # -- measured outcomes (scaleahead.outcomes) ------------------------------------------------
    def record_outcomes(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert measured outcome rows (``OutcomeRow``'s columns but ``id``) in one transaction.

        A row whose ``workload`` is longer than its column is refused (``ValueTooLong``) before
        anything is written. Returns the count."""
        if not rows:
            return 0
        for r in rows:
            _check_lengths(OutcomeRow.__table__, {"workload": r["workload"], "arm": r["arm"]})
            bad = [k for k, v in r.items() if isinstance(v, float) and not math.isfinite(v)]
            if bad:
                raise DataError(
                    f"Cannot record the measured outcome of {r['workload']} (bucket {r['bucket']:.0f}): "
                    f"{', '.join(bad)} is not a finite number; nothing was recorded.",
                    "This is a bug in what measured it (a glitch sample should count as missing): report it.",
                )
        with self.session() as s:
            s.execute(insert(OutcomeRow), [dict(r) for r in rows])
        return len(rows)

    def outcome_sums(
        self,
        start: float,
        end: float = math.inf,
        rollout_id: int | None = None,
        workloads: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Per workload, rollout and arm, the sums of the outcome rows of the buckets that start
        in ``[start, end)``; only ``rollout_id``'s rows when given (0: recorded outside a
        rollout), only ``workloads``' when given. One dict per group: ``workload``, ``rollout_id``,
        ``arm`` and the summed columns."""
        cols = (
            OutcomeRow.steps,
            OutcomeRow.seconds,
            OutcomeRow.short_steps,
            OutcomeRow.fallback_steps,
            OutcomeRow.capacity_seconds,
            OutcomeRow.demand_seconds,
            OutcomeRow.error_abs,
            OutcomeRow.error_actual,
            OutcomeRow.forecasts,
        )
        q = select(
            OutcomeRow.workload, OutcomeRow.rollout_id, OutcomeRow.arm, *(func.sum(c).label(c.key) for c in cols)
        ).where(OutcomeRow.bucket >= start)
        if math.isfinite(end):
            q = q.where(OutcomeRow.bucket < end)
        if rollout_id is not None:
            q = q.where(OutcomeRow.rollout_id == rollout_id)
        q = q.group_by(OutcomeRow.workload, OutcomeRow.rollout_id, OutcomeRow.arm).order_by(
            OutcomeRow.workload, OutcomeRow.rollout_id, OutcomeRow.arm
        )
        wanted = set(workloads) if workloads is not None else None
        out: list[dict[str, Any]] = []
        with self.session() as s:
            for row in s.execute(q):
                if wanted is not None and row.workload not in wanted:
                    continue
                d = dict(row._mapping)
                for c in cols:
                    d[c.key] = (int if c.key in ("steps", "short_steps", "fallback_steps", "forecasts") else float)(
                        d[c.key] or 0
                    )
                out.append(d)
        return out

    def outcome_span(self, rollout_id: int) -> tuple[int, float, float] | None:
        """``(rows, first bucket, last bucket)`` of ``rollout_id``'s outcome rows, or None."""
        with self.session() as s:
            n, first, last = s.execute(
                select(func.count(), func.min(OutcomeRow.bucket), func.max(OutcomeRow.bucket)).where(
                    OutcomeRow.rollout_id == rollout_id
                )
            ).one()
        return (int(n), float(first), float(last)) if n else None

    def prune_outcomes(self, before: float) -> int:
        """Delete the outcome rows of buckets that start before ``before`` (epoch s), in batches as
        ``prune_forecasts`` does. Returns the count."""
        return self._delete_in_batches(OutcomeRow, OutcomeRow.bucket < before)

    def prune_plans(self, before: float) -> tuple[int, int]:
        """Delete plans created before ``before`` and their journaled actions.

        Actions still ``planned`` (not yet journaled as applied, failed, skipped or dry-run) keep
        their plan, so a crash recovery can still reconcile them. Returns (plans, actions) deleted.
        """
        open_plans = select(ActionRow.plan_id).where(ActionRow.state == "planned")
        with self.session() as s:
            old = select(PlanRow.id).where(PlanRow.created_at < before, PlanRow.id.not_in(open_plans))
            ids = [int(i) for i in s.scalars(old)]
        n_actions = 0
        n_plans = 0
        # Batches of at most a tenth of ``prune_batch`` plans, each its own transaction (until
        # 2026-12-06 all in one), with a pause between them on SQLite; a plan is checked again in
        # its batch (an action of it may have been journaled ``planned`` meanwhile: it stays).
        step = max(1, self.prune_batch // 10)
        for i in range(0, len(ids), step):
            if i:
                self._pause_between_batches()
            with self.session() as s:
                chunk = [
                    int(p)
                    for p in s.scalars(
                        select(PlanRow.id).where(PlanRow.id.in_(ids[i : i + step]), PlanRow.id.not_in(open_plans))
                    )
                ]
                for j in range(0, len(chunk), 500):
                    part = chunk[j : j + 500]
                    deleted = s.execute(delete(ActionRow).where(ActionRow.plan_id.in_(part)))
                    n_actions += int(getattr(deleted, "rowcount", 0) or 0)
                    deleted = s.execute(delete(PlanRow).where(PlanRow.id.in_(part)))
                    n_plans += int(getattr(deleted, "rowcount", 0) or 0)
        return n_plans, n_actions

    def prune_model_checkpoints(
        self,
        before: float,
        keep_retired: int,
        now: float,
        in_use: Sequence[int] = (),
        remove_file: Callable[[int, str], bool] | None = None,
    ) -> list[int]:
        """Delete the stored checkpoints (``model_artifacts``) no one can need any more; returns the version ids.

        Kept, whatever their age: a version that is ``champion`` or ``production``, an arm of a
        running rollout (its id as the rollout's champion or challenger), and the newest
        ``keep_retired`` ``retired`` versions (former champions) of each family, the targets of a
        rollback (``scaleahead models promote ID``), and the versions ``in_use`` (what the caller
        runs). Others whose age reaches back before ``before`` (epoch s) lose their checkpoint: in
        practice the challengers that lost their rollout, by when they were registered, and older
        former champions, by when they were retired (``retired_at`` in their metrics; registration
        for versions retired before it was recorded). The version rows
        stay (name, metrics, data window) and record ``checkpoint_pruned_at`` = ``now`` in their
        metrics; the checkpoint file a version names is not touched here, unless ``remove_file``
        is given: it is called with each such version's id and ``artifact_path`` before its stored
        copy is deleted (``Daemon.prune`` deletes the files in its own artifact folder), and a
        version for which it returns False (its file could not be deleted) keeps its stored copy, so
        a later prune tries again; the file goes first, so a failure leaves no file without a row
        that names it for deletion.
        """
        with self.session() as s:
            arms = {
                a
                for r in s.execute(
                    select(RolloutRow.champion, RolloutRow.challenger).where(RolloutRow.state == "running")
                )
                for a in r
            }
            stored = set(s.scalars(select(ModelArtifactRow.model_id)))
            rows = list(s.scalars(select(ModelVersionRow)))

            def since(r: ModelVersionRow) -> float:
                """When the version stopped being the one in use: retired, or registered."""
                at = (r.metrics or {}).get("retired_at") if r.status == "retired" else None
                return float(at) if isinstance(at, int | float) else _aware(r.created_at).timestamp()

            rows.sort(key=lambda r: (since(r), r.id), reverse=True)  # newest first
            retired_seen: dict[str, int] = {}
            pruned: list[int] = []
            for r in rows:
                if r.status == "retired":
                    retired_seen[r.family] = retired_seen.get(r.family, 0) + 1
                    if retired_seen[r.family] <= keep_retired:
                        continue
                if (
                    r.id not in stored
                    or r.status in CHAMPION_STATUSES
                    or str(r.id) in arms
                    or r.id in in_use
                    or since(r) >= before
                ):
                    continue
                if remove_file is not None and not remove_file(r.id, r.artifact_path):
                    continue
                pruned.append(r.id)
                r.metrics = {**(r.metrics or {}), "checkpoint_pruned_at": now}
            for i in range(0, len(pruned), 500):
                s.execute(delete(ModelArtifactRow).where(ModelArtifactRow.model_id.in_(pruned[i : i + 500])))
            return sorted(pruned)

    def prune_steers(self, before: float) -> int:
        """Delete pod steers that are no longer pending (consumed, expired, cancelled) and were last
        changed before ``before`` (epoch s). Returns the count."""
        with self.session() as s:
            result = s.execute(
                delete(PodSteerRow).where(PodSteerRow.state != "pending", PodSteerRow.updated_at < before)
            )
            return int(getattr(result, "rowcount", 0) or 0)

    def count_forecasts(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(func.count()).select_from(ForecastRow)) or 0)

    def count_actions(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(func.count()).select_from(ActionRow)) or 0)


def _model(r: ModelVersionRow) -> ModelVersion:
    return ModelVersion(
        r.id,
        r.name,
        r.family,
        r.status,
        _aware(r.created_at).astimezone(UTC),  # SQLite: naive; PostgreSQL: in the server's TimeZone
        r.data_source,
        r.data_start,
        r.data_end,
        r.step_s,
        dict(r.hyperparams),
        dict(r.metrics),
        r.artifact_path,
        r.artifact_sha256,
    )


#: Marks a stored forecast whose values are float32 (its ``quantiles`` field starts with it).
F32_PREFIX = "f32:"
#: The largest float16: a forecast with a value above it (10,000 req/s per 10 s step) is stored as
#: float32, not as inf.
F16_MAX = float(np.finfo(np.float16).max)


def _compact(values: Any) -> tuple[Any, str]:
    """``[K, horizon]`` as float16 (3 significant digits, half the bytes), or as float32 with
    ``F32_PREFIX`` when a finite value does not fit float16 (it would be stored as inf)."""
    arr = np.asarray(values, dtype=np.float64)
    finite = arr[np.isfinite(arr)]
    if finite.size and float(np.abs(finite).max()) > F16_MAX:
        return arr.astype(np.float32), F32_PREFIX
    return arr.astype(np.float16), ""


def _aware(t: datetime) -> datetime:
    """``t`` with its zone: SQLite gives back the UTC time it stored without one."""
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _hide_password(shown: str, url: str | None = None) -> str:
    """A database URL (``shown``), or a message that may quote ``url``, with the password as ``***``:
    SQLAlchemy's rendering of a URL it parses, else a pattern (``scheme://user:PASSWORD@``); in a
    message, also the password itself where it is long enough not to match other words."""
    if url is None:
        try:
            return make_url(shown).render_as_string(hide_password=True)
        except (SQLAlchemyError, ValueError):
            url = shown
    try:
        password = make_url(url).password
    except (SQLAlchemyError, ValueError):
        password = None
    if password and len(str(password)) >= 4:
        shown = shown.replace(str(password), "***")
    return hide_password(shown)


def _few(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _engine(url: str) -> Engine:
    """The store's engine for ``url`` (no connection yet), or a ``UserError`` saying what is wrong
    with the URL."""
    try:
        return create_engine(url, future=True, json_serializer=json_dumps, connect_args=_connect_args(url))
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        shown = _hide_password(url)
        scheme = shown.split("://", 1)[0] if "://" in shown else ""
        hint = (
            f"{scheme}:// is not a scheme SQLAlchemy knows: write postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"
            if scheme == "postgres"
            else "Use sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"
        )
        raise UserError(f"Database URL {shown!r} is not usable: {_hide_password(str(exc), url)}.", f"{hint}.") from exc


class _PipelineEndNotice(logging.Filter):
    """Drops psycopg's warning "error ignored terminating <Pipeline>: ..." (``_quiet_pipeline_ends``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        import psycopg

        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "error ignored terminating %r: %s" and args and isinstance(args[0], psycopg.Pipeline))


@functools.cache
def _quiet_pipeline_ends() -> None:
    """The journal's pipeline raises the first error it meets; psycopg then also logs, as a
    warning, the second error it met ending the pipeline ("pipeline aborted", or the "division by
    zero" of a missing action row), which would show an operator a database problem for an
    ordinary ``KeyError`` or refused value (audit). Only the journal opens psycopg pipelines."""
    logging.getLogger("psycopg").addFilter(_PipelineEndNotice())


def _interrupt_behind(exc: BaseException) -> BaseException | None:
    """The ``KeyboardInterrupt`` or ``SystemExit`` (not an ``Exception``) that ``exc`` was raised
    while handling, if any: psycopg's pipeline, interrupted while it waits, ends with an error of its
    own that hides the interrupt."""
    seen: set[int] = set()
    cause = exc.__context__
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, Exception):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None: another database, in-memory, a ``file:`` URI, or unparsable)."""
    try:
        u = make_url(url)
    except (SQLAlchemyError, ValueError):
        return None  # create_engine says what is wrong with it
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    if u.database.startswith("file:") or "uri" in u.query:
        return None
    return Path(u.database)


def _lock_timed_out(exc: OperationalError) -> bool:
    """PostgreSQL's "canceling statement due to lock timeout" (SQLSTATE 55P03)."""
    return getattr(exc.orig, "sqlstate", None) == "55P03"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL: commits survive a process crash (not a power cut) at a fraction of FULL's fsyncs.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
