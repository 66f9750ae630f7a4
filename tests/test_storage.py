"""Storage on real SQLite and PostgreSQL: migrations, plans, the journal, forecasts, models, rollouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaleahead.errors import UserError
from scaleahead.types import Forecast, Plan, Reason, ScaleTo, WorkloadRef, batch_forecasts
from storage import Store
from tests.conftest import Cli

WEB = WorkloadRef("Deployment", "default", "web")
WEB_TARGET = "Deployment/default/web"


def _plan(now: float = 1000.0) -> Plan:
    a = ScaleTo(WEB, 3, 5, Reason("forecast", "scale default/web 3 -> 5: p90 forecast", {"forecast_peak": 9.5}))
    return Plan(now, (a,), {WEB: "reactive"})


def test_upgrade_from_empty_reaches_head(db_url: str) -> None:
    store = Store(db_url, upgrade=False)
    assert store.current_revision() is None
    store.upgrade()
    assert store.current_revision() == Store.head_revision()


def test_downgrade_and_upgrade_again_keeps_working(db_url: str) -> None:
    store = Store(db_url)
    store.downgrade("base")
    assert store.current_revision() is None
    store.upgrade()
    store.record_plan(_plan(), source="test")
    assert store.count_plans() == 1


def test_plan_and_actions_are_journaled_with_reasons(db_url: str) -> None:
    store = Store(db_url)
    plan_id, (aid,) = store.record_plan(_plan(), source="test")
    (row,) = store.actions(plan_id=plan_id)
    assert (row.kind, row.target, row.from_value, row.to_value, row.state) == (
        "ScaleTo",
        "Deployment/default/web",
        "3",
        "5",
        "planned",
    )
    assert row.reason.startswith("scale default/web")
    store.set_action_state(aid, "applied", "ok", 1001.0)
    assert store.actions(state="applied")[0].outcome == "ok"


def test_forecasts_round_trip_within_float16_precision(db_url: str) -> None:
    store = Store(db_url, forecast_interval_s=120)
    q = {0.1: np.linspace(0, 10, 90), 0.5: np.linspace(1, 11, 90), 0.9: np.linspace(2, 12, 90)}
    fcs = [Forecast(WEB, 1000.0 + 10 * i, 10.0, q, "naive") for i in range(30)]
    stored = store.record_forecasts(fcs)
    assert stored == 3  # one per 120 s over 300 s
    back = store.forecasts(WEB)
    assert [f.origin for f in back] == [1000.0, 1120.0, 1240.0]
    np.testing.assert_allclose(back[0].quantiles[0.9], q[0.9], rtol=1e-3)


def test_forecasts_above_the_float16_range_are_stored_wide_not_as_infinity(db_url: str) -> None:
    store = Store(db_url, forecast_interval_s=0)
    big = {0.5: np.linspace(60_000, 150_000, 90), 0.9: np.linspace(70_000, 170_000, 90)}
    small = {0.5: np.linspace(1, 11, 90), 0.9: np.linspace(2, 12, 90)}
    store.record_forecasts([Forecast(WEB, 1000.0, 10.0, big, "naive"), Forecast(WEB, 1010.0, 10.0, small, "naive")])
    wide, narrow = store.forecasts(WEB)
    for q in big:  # before: every value above 65,504 came back as inf
        assert np.isfinite(wide.quantiles[q]).all()
        np.testing.assert_allclose(wide.quantiles[q], big[q], rtol=1e-6)
        np.testing.assert_allclose(narrow.quantiles[q], small[q], rtol=1e-3)  # still float16
    store.close()


def test_forecasts_of_a_forecaster_batch_round_trip_like_plain_ones(db_url: str) -> None:
    store = Store(db_url)
    refs = [WorkloadRef("Deployment", "default", f"w{i}") for i in range(3)]
    q = np.stack([np.stack([np.linspace(i, 10 + i, 90) + k for k in range(3)]) for i in range(3)])
    # quantile keys given out of order: the batch sorts them, and so must what is stored
    fcs = batch_forecasts(refs, [1000.0] * 3, [10.0] * 3, q, (0.9, 0.1, 0.5), "lstm")
    assert store.record_forecasts(fcs) == 3
    for i, ref in enumerate(refs):
        (back,) = store.forecasts(ref)
        assert list(back.quantiles) == [0.1, 0.5, 0.9] and back.model == "lstm"
        np.testing.assert_allclose(back.quantiles[0.9], q[i, 0], rtol=1e-3)  # 0.9 was given first
        np.testing.assert_allclose(back.quantiles[0.1], q[i, 1], rtol=1e-3)


def test_model_registry_and_rollouts(db_url: str) -> None:
    store = Store(db_url)
    mid = store.register_model("lstm-1", "lstm", step_s=10.0, hyperparams={"hidden": 64}, metrics={"wql": 0.2})
    assert store.model(mid).hyperparams == {"hidden": 64}
    rid = store.create_rollout("default", "canary", "model:1", f"model:{mid}", now=5.0, share=0.1)
    store.update_rollout(store.rollout(rid), 6.0, state="promoted", share=1.0)
    (r,) = store.rollouts()
    assert (r.state, r.share) == ("promoted", 1.0)


def test_a_model_versions_registration_time_reads_back_in_utc_on_every_database(db_url: str, cli: Cli) -> None:
    """SQLite gave the time back without a zone, PostgreSQL in the server's TimeZone (here New
    York): the same registration printed and serialized differently. Both are UTC now."""
    from datetime import UTC, datetime, timedelta

    if db_url.startswith("postgresql"):
        import psycopg

        server, name = db_url.replace("postgresql+psycopg://", "postgresql://").rsplit("/", 1)
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {name} SET timezone TO 'America/New_York'")
    store = Store(db_url)
    mid = store.register_model("m", "seasonal_naive", created_at=1796475600.0)  # 2026-12-05 13:00 UTC
    for m in (store.model(mid), store.models()[0]):
        assert m.created_at == datetime(2026, 12, 5, 13, 0, tzinfo=UTC)
        assert m.created_at.utcoffset() == timedelta(0) and m.created_at.isoformat() == "2026-12-05T13:00:00+00:00"
    store.close()
    code, out, _ = cli("models", "list", "--db", db_url)
    assert code == 0 and "created (UTC)" in out and "2026-12-05 13:00" in out
    code, out, _ = cli("models", "list", "--db", db_url, "--output", "json")
    assert code == 0 and '"created_at": "2026-12-05T13:00:00+00:00"' in out


def test_unreachable_database_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="Cannot reach or write the database"):
        Store("postgresql+psycopg://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize(
    "url",
    ["postgres://scaleahead:S3cretPassw0rd@db:5432/scaleahead", "postgresql+nodriver://scaleahead:S3cretPassw0rd@db/x"],
)
def test_a_database_url_without_a_usable_driver_is_refused_without_showing_its_password(url: str) -> None:
    with pytest.raises(UserError, match="is not usable") as refused:
        Store(url)
    assert "S3cretPassw0rd" not in refused.value.message and "scaleahead:***@db" in refused.value.message
    if url.startswith("postgres:"):  # the common spelling of other tools: say which one SQLAlchemy takes
        assert "postgres:// is not a scheme SQLAlchemy knows: write postgresql+psycopg://" in refused.value.message


def test_measured_forecast_storage_is_under_a_megabyte_per_workload_day() -> None:
    from scaleahead.commands.storage import measure_forecast_bytes

    assert 100_000 < measure_forecast_bytes(workloads=1) < 1_000_000


def test_the_journal_filters_by_workload_and_time(db_url: str) -> None:
    store = Store(db_url)
    api = WorkloadRef("Deployment", "default", "api")
    odd = WorkloadRef("Deployment", "default", "x-web")  # ends like web's name but is another workload
    for t, ref in ((1000.0, WEB), (2000.0, api), (3000.0, WEB), (4000.0, odd)):
        _, (aid,) = store.record_plan(Plan(t, (ScaleTo(ref, 1, 2, Reason("forecast", f"scale {ref}")),)), "test")
        store.set_action_state(aid, "applied", "ok", t)
    assert [a.updated_at for a in store.actions(target="default/web")] == [3000.0, 1000.0]
    assert [a.updated_at for a in store.actions(target="Deployment/default/web")] == [3000.0, 1000.0]
    assert [a.updated_at for a in store.actions(target="default/web", since=2000.0)] == [3000.0]
    assert [a.target for a in store.actions(since=2000.0, limit=2)] == [
        "Deployment/default/x-web",
        "Deployment/default/web",
    ]
    assert store.actions(target="default/w_b") == [] and store.actions(target="default/%") == []  # no wildcards
    assert store.actions(target="Default/Web") == []  # exact, also on SQLite


def test_managed_fields_are_listed_by_target_and_forgotten_one_by_one(db_url: str) -> None:
    store = Store(db_url)
    assert store.managed_fields() == []
    store.set_managed_field("KnativeService/fn/b", "min-scale", 2, "7", 10.0)
    store.set_managed_field("Deployment/shop/a", "spec.replicas", 5, "3", 11.0)
    assert [(m.target, m.value) for m in store.managed_fields()] == [
        ("Deployment/shop/a", 5),
        ("KnativeService/fn/b", 2),
    ]
    store.forget_managed_field("KnativeService/fn/b")
    store.forget_managed_field("KnativeService/fn/never-written")  # nothing to forget: no error
    assert [m.target for m in store.managed_fields()] == ["Deployment/shop/a"]
    assert store.managed_field("KnativeService/fn/b") is None


def test_migration_0007_adds_the_confirmed_value_without_claiming_old_rows(db_url: str) -> None:
    """A record from before 0007_written holds no confirmed write (its value may be a failed write's
    baseline); a confirmed write sets it; a downgrade drops the column and keeps the rest."""
    from sqlalchemy import text

    old = Store(db_url, upgrade=False)
    old.upgrade("0006_riskfp")
    with old.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO managed_fields (target, field, value, resource_version, written_at) "
                "VALUES ('KnativeService/fn/a', 'min-scale', 3, '7', 10.0)"
            )
        )
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision() == "0013_outcomes"
    assert store.managed_field("KnativeService/fn/a").written_value is None  # type: ignore[union-attr]
    store.set_managed_field("KnativeService/fn/a", "min-scale", 4, "intent:4:7", 20.0)  # an intent: not confirmed
    assert store.managed_field("KnativeService/fn/a").written_value is None  # type: ignore[union-attr]
    store.set_managed_field("KnativeService/fn/a", "min-scale", 4, "8", 21.0, written=True)
    assert store.managed_field("KnativeService/fn/a").written_value == 4  # type: ignore[union-attr]
    store.set_managed_field("KnativeService/fn/a", "min-scale", 5, "intent:5:8", 30.0)  # the next intent keeps it
    assert store.managed_field("KnativeService/fn/a").written_value == 4  # type: ignore[union-attr]
    store.downgrade("0006_riskfp")
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT target, value FROM managed_fields")).all()
    assert [tuple(r) for r in rows] == [("KnativeService/fn/a", 5)]
    store.close()


def test_migration_0008_records_a_fields_original_only_at_its_first_write(db_url: str) -> None:
    """A record from before 0008_original has no known original (a release then writes 0); a first
    write records the field as it was (None: not set), a later write or a re-created record after
    forgetting records anew only then; a downgrade drops both columns and keeps the rest."""
    from sqlalchemy import text

    old = Store(db_url, upgrade=False)
    old.upgrade("0007_written")
    with old.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO managed_fields (target, field, value, resource_version, written_at, written_value) "
                "VALUES ('KnativeService/fn/a', 'min-scale', 3, '7', 10.0, 3)"
            )
        )
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision() == "0013_outcomes"
    a = store.managed_field("KnativeService/fn/a")
    assert a is not None and (a.original_recorded, a.original_value, a.written_value) == (False, None, 3)
    store.set_managed_field("KnativeService/fn/a", "min-scale", 3, "intent:4:7", 20.0, original=3)
    assert not store.managed_field("KnativeService/fn/a").original_recorded  # type: ignore[union-attr]
    store.set_managed_field("KnativeService/fn/b", "min-scale", 0, "intent:2:1", 20.0, original=None)
    store.set_managed_field("KnativeService/fn/c", "min-scale", 1, "intent:2:1", 20.0, original=1)
    store.set_managed_field("KnativeService/fn/c", "min-scale", 2, "2", 21.0, written=True, original=2)
    b, c = store.managed_field("KnativeService/fn/b"), store.managed_field("KnativeService/fn/c")
    assert b is not None and (b.original_recorded, b.original_value) == (True, None)
    assert c is not None and (c.original_recorded, c.original_value, c.written_value) == (True, 1, 2)
    store.forget_managed_field("KnativeService/fn/c")
    store.set_managed_field("KnativeService/fn/c", "min-scale", 0, "intent:2:5", 30.0, original=0)
    assert store.managed_field("KnativeService/fn/c").original_value == 0  # type: ignore[union-attr]
    store.downgrade("0007_written")
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT target, value, written_value FROM managed_fields ORDER BY target")).all()
    assert [tuple(r) for r in rows] == [
        ("KnativeService/fn/a", 3, 3),
        ("KnativeService/fn/b", 0, None),
        ("KnativeService/fn/c", 0, None),
    ]
    store.close()


@pytest.mark.parametrize("doc", ["storage.md", "cli.md"])
def test_docs_list_every_schema_revision(doc: str) -> None:
    """docs/storage.md and docs/cli.md name the revisions `db upgrade --revision` takes; a new
    migration is listed (cli.md stopped at 0006 for two migrations)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / doc).read_text()
    listed = " ".join(text.split("revision ids, oldest first:", 1)[1].split("; any other", 1)[0].split())
    assert [r.strip(" `") for r in listed.split(",")] == Store.revisions()


def test_migration_0009_keeps_one_running_rollout_per_group_and_notes_the_others(db_url: str) -> None:
    """Duplicate running rollouts written before 0009_one_running: the newest of a group stays
    running, older ones become superseded with a note; afterwards a second running one is refused;
    a downgrade drops the index and keeps the rows."""
    from sqlalchemy import text

    from storage.store import RolloutRunning

    old = Store(db_url, upgrade=False)
    old.upgrade("0008_original")
    with old.engine.begin() as conn:
        for group, challenger, state in (
            ("web", "5", "running"),
            ("web", "6", "aborted"),
            ("web", "7", "running"),
            ("api", "8", "running"),
            ("web", "9", "running"),
        ):
            conn.execute(
                text(
                    'INSERT INTO rollouts ("group", mode, state, champion, challenger, share, started_at, '
                    "updated_at, params, results) VALUES (:g, 'shadow', :s, '1', :c, 0.0, 1.0, 1.0, '{}', :r)"
                ),
                {"g": group, "s": state, "c": challenger, "r": '{"retrained": true}'},
            )
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision() == "0013_outcomes"
    got = {r.challenger: (r.group, r.state, r.results) for r in store.rollouts()}
    note = {"retrained": True, "superseded_by_migration": "0009_one_running", "superseded_by_rollout": 5}
    assert got == {
        "5": ("web", "superseded", note),
        "6": ("web", "aborted", {"retrained": True}),
        "7": ("web", "superseded", note),
        "8": ("api", "running", {"retrained": True}),
        "9": ("web", "running", {"retrained": True}),
    }
    with pytest.raises(RolloutRunning):
        store.create_rollout("web", "shadow", "1", "10", now=2.0)
    store.downgrade("0008_original")
    store.create_rollout("web", "shadow", "1", "10", now=2.0)  # no index any more
    assert [r.state for r in store.rollouts(group="web")].count("running") == 2
    store.close()


def test_migration_0010_keeps_one_champion_per_family_and_notes_the_others(db_url: str) -> None:
    """Duplicate champions written before 0010_one_champion: the newest of a family stays, older
    ``champion`` and ``production`` versions retire with a note; afterwards the database refuses a
    second champion in a family; a downgrade drops the index and keeps the rows."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    old = Store(db_url, upgrade=False)
    old.upgrade("0009_one_running")
    with old.engine.begin() as conn:
        for name, family, status in (
            ("l1", "lstm", "champion"),
            ("l2", "lstm", "production"),
            ("l3", "lstm", "candidate"),
            ("r4", "ridge", "champion"),
            ("l5", "lstm", "champion"),
        ):
            conn.execute(
                text(
                    "INSERT INTO model_versions (name, family, status, created_at, data_source, hyperparams, metrics, "
                    "artifact_path, artifact_sha256) VALUES (:n, :f, :s, '2026-12-01 00:00:00', '', '{}', :m, '', '')"
                ),
                {"n": name, "f": family, "s": status, "m": '{"wql": 0.2}'},
            )
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision() == "0013_outcomes"
    got = {m.name: m.status for m in store.models()}
    assert got == {"l1": "retired", "l2": "retired", "l3": "candidate", "r4": "champion", "l5": "champion"}
    l1 = next(m for m in store.models() if m.name == "l1")
    assert l1.metrics["retired_by_migration"] == "0010_one_champion" and l1.metrics["retired_by_model"] == 5
    assert l1.metrics["wql"] == 0.2 and isinstance(l1.metrics["retired_at"], float)
    insert_champion = text(
        "INSERT INTO model_versions (name, family, status, created_at, data_source, hyperparams, metrics, "
        "artifact_path, artifact_sha256) "
        "VALUES ('x', 'lstm', 'production', '2026-12-01 00:00:00', '', '{}', '{}', '', '')"
    )
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(insert_champion)
    store.downgrade("0009_one_running")
    with store.engine.begin() as conn:
        conn.execute(insert_champion)
        assert conn.execute(text("SELECT count(*) FROM model_versions WHERE status = 'retired'")).scalar() == 2
    store.close()


def test_a_champion_registered_or_set_retires_its_familys_champion(db_url: str) -> None:
    """register_model(status="champion") and set_model_status(ID, "champion") promote as
    make_champion does: the family keeps one champion (they used to add a second)."""
    store = Store(db_url)
    a = store.register_model("a", "lstm", status="champion", created_at=10.0)
    other = store.register_model("r", "ridge", status="champion")
    b = store.register_model("b", "lstm", status="production", created_at=20.0)
    assert (store.model(a).status, store.model(a).metrics["retired_at"], store.model(b).status) == (
        "retired",
        20.0,
        "production",
    )
    c = store.register_model("c", "lstm")
    store.set_model_status(c, "champion")
    assert {m.id: m.status for m in store.models()} == {a: "retired", other: "champion", b: "retired", c: "champion"}
    store.set_model_status(c, "retired")
    assert [m.id for m in store.models() if m.status == "champion"] == [other]
    store.close()


def test_the_champion_and_rollouts_by_id_are_what_the_full_lists_give(db_url: str) -> None:
    """Store.champion(family) and Store.rollouts(ids=...) (the daemon's once-a-minute reads) give
    what filtering models() / rollouts() gave, on both databases."""
    from storage.store import CHAMPION_STATUSES

    store = Store(db_url)

    def champion_from_all(family: str) -> int | None:
        found = [m.id for m in store.models() if m.family == family and m.status in CHAMPION_STATUSES]
        return found[-1] if found else None

    assert store.champion("lstm") is None and store.rollouts(ids=[1, 2]) == [] and store.rollouts(ids=[]) == []
    a = store.register_model("a", "lstm", status="champion")
    store.register_model("c", "lstm", status="challenger")
    r = store.register_model("r", "ridge", status="production")
    b = store.register_model("b", "lstm", status="retired")
    for family in ("lstm", "ridge", "window_mean"):
        got = store.champion(family)
        assert (got.id if got else None) == champion_from_all(family)
    assert store.champion("lstm") == store.model(a) and store.champion("ridge") == store.model(r)
    store.make_champion(b)  # a rollback: a retired
    assert store.champion("lstm") == store.model(b) and champion_from_all("lstm") == b
    store.set_model_status(b, "retired")
    assert store.champion("lstm") is None and champion_from_all("lstm") is None
    ids = [store.create_rollout(g, "shadow", "1", str(i), now=float(i)) for i, g in enumerate(("web", "api", "db"))]
    store.update_rollout(store.rollout(ids[1]), 9.0, state="promoted")
    everything = store.rollouts()
    for wanted in ([ids[2], ids[0]], [ids[1]], [ids[0], ids[0], 999], ids):
        assert store.rollouts(ids=wanted) == [x for x in everything if x.id in wanted], wanted
    assert store.rollouts(ids=ids, state="running") == [x for x in everything if x.state == "running"]
    assert [x.id for x in store.rollouts(group="web", ids=ids)] == [ids[0]]
    store.close()


def test_a_forecast_with_many_quantile_levels_is_stored_on_every_database(db_url: str) -> None:
    """forecasts.quantiles was VARCHAR(64): 19 levels (0.05 .. 0.95) were stored by SQLite and
    refused by PostgreSQL with a raw DataError. It is TEXT since 0010_one_champion."""
    levels = [round(0.05 * i, 2) for i in range(1, 20)]
    store = Store(db_url)
    fc = Forecast(WEB, 1000.0, 10.0, {q: np.full(6, 10.0 * q) for q in levels}, "lstm")
    assert store.record_forecasts([fc]) == 1
    (back,) = store.forecasts(WEB)
    assert sorted(back.quantiles) == levels
    assert np.allclose(back.quantiles[0.95], 9.5, rtol=1e-3)
    store.close()


def test_journal_writes_the_field_records_in_one_executemany_in_order(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Store.journal`` sends every field record of a transaction in one executemany of upserts
    (the actuator's per-action cost) with the one-by-one path's meaning: ``written_value`` and
    ``uid`` kept where a write leaves them, a human edit forgotten, two writes to one record applied
    in order; a record that does not exist yet is inserted, with its original, by the same one
    executemany (until 2026-12-06 a first write sent every write again, one by one). On
    PostgreSQL it goes to psycopg directly, in a pipeline (counted there)."""
    import psycopg
    from sqlalchemy import event

    from storage.store import FieldWrite

    store = Store(db_url)
    a, b, c = "Deployment/shop/a", "Deployment/shop/b", "Deployment/shop/c"
    store.set_managed_field(a, "spec.replicas", 4, "5", 10.0, written=True, uid="uid-a")
    store.set_managed_field(b, "spec.replicas", 2, "6", 10.0, uid="uid-b")
    store.set_human_edit(a, 9, 11.0)
    seen: list[tuple[str, bool]] = []

    def count(_conn, _cursor, statement, _params, _context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "managed_fields" in statement:
            seen.append((statement.split()[0].upper(), bool(executemany)))

    event.listen(store.engine, "before_cursor_execute", count)
    executemany = psycopg.Cursor.executemany

    def counted(cur, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        count(None, cur, str(query), None, None, True)
        return executemany(cur, query, params_seq, **kw)

    monkeypatch.setattr(psycopg.Cursor, "executemany", counted)
    store.journal(
        [],
        [
            FieldWrite(a, "spec.replicas", 6, "9", 20.0, written=True),
            FieldWrite(b, "spec.replicas", 7, "intent:7:6", 20.0, uid="uid-b2"),
            FieldWrite(a, "spec.replicas", 8, "intent:8:9", 21.0),
        ],
        21.0,
    )
    assert seen == [("INSERT", True)]  # one executemany of INSERT ... ON CONFLICT DO UPDATE
    ra, rb = store.managed_field(a), store.managed_field(b)
    assert ra is not None and rb is not None
    assert (ra.value, ra.resource_version, ra.written_at, ra.written_value, ra.uid) == (
        8,
        "intent:8:9",
        21.0,
        6,
        "uid-a",
    )
    assert (ra.human_value, ra.human_seen_at) == (None, None)
    assert (rb.value, rb.written_value, rb.uid) == (7, None, "uid-b2")

    seen.clear()
    store.journal(
        [],
        [
            FieldWrite(a, "spec.replicas", 8, "10", 22.0, written=True),
            FieldWrite(c, "spec.replicas", 3, "intent:3:1", 22.0, original=1, uid="uid-c"),
        ],
        22.0,
    )
    assert seen == [("INSERT", True)]  # c has no record: the same executemany inserts it
    ra, rc = store.managed_field(a), store.managed_field(c)
    assert ra is not None and (ra.value, ra.written_value, ra.uid) == (8, 8, "uid-a")
    assert rc is not None
    assert (rc.value, rc.written_value, rc.uid, rc.original_recorded, rc.original_value) == (3, None, "uid-c", True, 1)
    event.remove(store.engine, "before_cursor_execute", count)
    store.close()


def test_action_states_set_in_one_transaction_only_where_still_planned(db_url: str) -> None:
    """``set_action_states_from``: each row written only if its state is still the given one (another
    process may have journaled it meanwhile); the ids written are returned; a state it does not know
    is refused before anything is written."""
    store = Store(db_url)
    plan = Plan(1000.0, tuple(ScaleTo(WorkloadRef("Deployment", "default", n), 1, 2, Reason("t", "t")) for n in "abc"))
    _, (a, b, c) = store.record_plan(plan, source="test")
    store.set_action_state(b, "applied", "by another process", 1001.0)
    with pytest.raises(ValueError, match="unknown action state 'done'"):
        store.set_action_states_from([(a, "skipped", "x"), (c, "done", "y")], 1002.0, only_from="planned")
    assert {r.id: r.state for r in store.actions()} == {a: "planned", b: "applied", c: "planned"}
    written = store.set_action_states_from(
        [(a, "skipped", "reconciled: x"), (b, "skipped", "reconciled: y"), (c, "applied", "reconciled: z")],
        1002.0,
        only_from="planned",
    )
    assert written == {a, c}
    rows = {r.id: (r.state, r.outcome) for r in store.actions()}
    assert rows == {
        a: ("skipped", "reconciled: x"),
        b: ("applied", "by another process"),
        c: ("applied", "reconciled: z"),
    }
    store.close()


def test_action_states_of_more_rows_than_one_statement_holds(db_url: str) -> None:
    """1,201 rows, every third one journaled by another process first: exactly the others written,
    each with its own state and outcome, across the chunks of 500 (on PostgreSQL one ``UPDATE ...
    FROM (VALUES ...)`` a chunk, in one transaction; on SQLite a statement a row)."""
    store = Store(db_url)
    refs = [WorkloadRef("Deployment", "default", f"w{i}") for i in range(1201)]
    plan = Plan(1000.0, tuple(ScaleTo(r, 1, 2, Reason("t", "t")) for r in refs))
    _, ids = store.record_plan(plan, source="test")
    taken = set(ids[::3])
    assert store.set_action_states_from([(i, "applied", "other") for i in taken], 1001.0, "planned") == taken
    ups = [(i, "skipped" if n % 2 else "applied", f"reconciled {n}") for n, i in enumerate(ids)]
    again = [(ids[1], "failed", "given twice: the first one counts")]
    assert store.set_action_states_from(ups + again, 1002.0, only_from="planned") == set(ids) - taken
    rows = {r.id: (r.state, r.outcome, r.updated_at) for r in store.actions(limit=5000)}
    for n, i in enumerate(ids):
        want = ("applied", "other", 1001.0) if i in taken else (ups[n][1], ups[n][2], 1002.0)
        assert rows[i] == want, (n, i)
    store.close()


def test_a_row_given_twice_is_updated_in_order_as_one_statement_a_row_would(db_url: str) -> None:
    """The second update of a row sees the first's write, on every database: after one that keeps
    the row ``planned`` the second applies too (an audit saw PostgreSQL's single statement keep the
    first only, where SQLite's one-by-one statements applied both)."""
    store = Store(db_url)
    plan = Plan(1000.0, tuple(ScaleTo(WorkloadRef("Deployment", "default", n), 1, 2, Reason("t", "t")) for n in "ab"))
    _, (a, b) = store.record_plan(plan, source="test")
    ups = [(a, "planned", "first"), (b, "applied", "b first"), (a, "applied", "second"), (b, "failed", "b second")]
    assert store.set_action_states_from(ups, 1002.0, only_from="planned") == {a, b}
    rows = {r.id: (r.state, r.outcome) for r in store.actions()}
    assert rows == {a: ("applied", "second"), b: ("applied", "b first")}
    store.close()


def test_journal_updates_a_record_another_process_created_meanwhile(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No record of a target when the journal's transaction starts; another process creates it and
    commits right before the journal's write: the write lands on that record (an audit found it
    skipped, the write-ahead intent lost, when the missing records were found by a SELECT after an
    UPDATE; the upsert's ON CONFLICT is atomic). PostgreSQL only: on SQLite the journal's
    transaction holds the database's write lock, so no one can."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite: no other writer can get in between")
    import psycopg

    from storage.store import FieldWrite

    store = Store(db_url)
    target = "Deployment/shop/new"
    done = [False]

    # the journal's statements go to psycopg directly (one pipeline): the other process writes
    # right before the upserts are sent, after the transaction's BEGIN and UPDATE
    executemany = psycopg.Cursor.executemany

    def meanwhile(cur, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        if not done[0] and str(query).startswith("INSERT INTO managed_fields"):
            done[0] = True
            with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as other:
                other.execute(
                    "INSERT INTO managed_fields (target, field, value, resource_version, written_at, "
                    "original_recorded, editor_reverts) VALUES (%s, 'spec.replicas', 1, 'other', 5.0, false, 0)",
                    (target,),
                )
        return executemany(cur, query, params_seq, **kw)

    _, (aid,) = store.record_plan(_plan(), source="test")
    monkeypatch.setattr(psycopg.Cursor, "executemany", meanwhile)
    # an outcome first: the transaction has begun (and written) before the other process's insert
    store.journal([(aid, "applied", "ok")], [FieldWrite(target, "spec.replicas", 7, "intent:7:1", 10.0, uid="u")], 10.0)
    monkeypatch.undo()
    record = store.managed_field(target)
    assert done[0] and record is not None
    assert (record.value, record.resource_version, record.uid) == (7, "intent:7:1", "u")
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_journal_on_postgresql_takes_one_round_trip_and_a_refused_statement_writes_nothing(db_url: str) -> None:
    """On PostgreSQL the journal's transaction goes in one psycopg pipeline: BEGIN, the outcomes'
    UPDATEs, the upserts and COMMIT sent together and answered together (one wait for the server;
    was four, then two while the COMMIT waited for the UPDATE's row count). A statement the server
    refuses (here a value out of INTEGER's range, which no check before catches) raises
    SQLAlchemy's error, leaves nothing of the transaction written, and the connection is fit for
    the next journal. An outcome for an action row that is not there is refused by the server
    (its UPDATE fails), so the COMMIT sent with it writes nothing."""
    import psycopg
    from sqlalchemy.exc import DataError as SQLDataError

    from storage.store import FieldWrite

    store = Store(db_url)
    assert store._pipelined
    _, (aid,) = store.record_plan(_plan(), source="test")
    waits: list[str] = []
    sync, commit = psycopg.Pipeline.sync, psycopg.Cursor.execute
    end = psycopg.Pipeline.__exit__

    def counted_sync(pipeline):  # type: ignore[no-untyped-def]
        waits.append("sync")  # the client sends what it has and waits for every answer so far
        return sync(pipeline)

    def counted_end(pipeline, *args):  # type: ignore[no-untyped-def]
        waits.append("end")  # the same, at the pipeline's end
        return end(pipeline, *args)

    def counted_execute(cur, query, *args, **kw):  # type: ignore[no-untyped-def]
        if str(query) in ("BEGIN", "COMMIT", "ROLLBACK"):
            waits.append(str(query))
        return commit(cur, query, *args, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(psycopg.Pipeline, "sync", counted_sync)
    mp.setattr(psycopg.Cursor, "execute", counted_execute)
    mp.setattr(psycopg.Pipeline, "__exit__", counted_end)
    try:
        with pytest.raises(SQLDataError, match="out of range"):
            store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 2**40, "9", 20.0)], 20.0)
        assert store.managed_field(WEB_TARGET) is None
        assert [a.state for a in store.actions()] == ["planned"]  # the outcome's UPDATE rolled back too
        # an outcome for a row that is gone: named, and nothing written (refused by the server
        # before the COMMIT sent with it)
        with pytest.raises(KeyError, match="999999"):
            store.journal(
                [(aid, "applied", "ok"), (999_999, "applied", "ok")],
                [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)],
                20.0,
            )
        assert store.managed_field(WEB_TARGET) is None and [a.state for a in store.actions()] == ["planned"]
        waits.clear()
        store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 21.0)], 21.0)
    finally:
        mp.undo()
    assert waits == ["BEGIN", "COMMIT", "end"]  # one pipeline, sent together with its COMMIT: one wait
    record = store.managed_field(WEB_TARGET)
    assert record is not None and (record.value, record.resource_version) == (5, "9")
    assert [(a.state, a.outcome) for a in store.actions()] == [("applied", "ok")]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_journal_on_postgresql_interrupted_while_the_pipeline_ends_raises_the_interrupt(db_url: str) -> None:
    """Ctrl-C while the pipeline's end waits for the server: the caller gets the
    ``KeyboardInterrupt``, not psycopg's "cannot exit pipeline mode while busy" wrapped as a
    database error (an audit saw the CLI say the database was down, for a transaction that had
    committed); the connection is discarded and the next journal works."""
    import psycopg._pipeline_base as pipeline_base

    from storage.store import FieldWrite

    store = Store(db_url)
    _, (aid,) = store.record_plan(_plan(), source="test")
    fetch_many, hits = pipeline_base.fetch_many, [0]

    def interrupted(pgconn):  # type: ignore[no-untyped-def]
        hits[0] += 1
        if hits[0] == 1:  # the wait for the answers at the pipeline's end
            raise KeyboardInterrupt
        return (yield from fetch_many(pgconn))

    mp = pytest.MonkeyPatch()
    mp.setattr(pipeline_base, "fetch_many", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)], 20.0)
    finally:
        mp.undo()
    assert hits[0] >= 1
    store.journal([(aid, "failed", "x")], [FieldWrite(WEB_TARGET, "spec.replicas", 6, "10", 21.0)], 21.0)
    record = store.managed_field(WEB_TARGET)
    assert record is not None and record.value == 6 and [a.state for a in store.actions()] == ["failed"]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_journal_on_postgresql_names_a_missing_row_first_quietly_on_one_connection(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing action row is the ``KeyError`` also when a field's value cannot be sent (a NUL
    byte: psycopg refuses it before the server answers the UPDATE), as on the Core path, which runs
    the UPDATE first; the check for missing rows runs with the pipeline's connection back in the
    pool, not on a second one beside it; and psycopg logs no warning of the error it met ending
    the pipeline ("division by zero" for an ordinary missing row; audit findings)."""
    import logging

    from storage.store import FieldWrite

    store = Store(db_url)
    _, (aid,) = store.record_plan(_plan(), source="test")
    checked_out: list[int] = []
    refuse = Store._refuse_missing_actions

    def counted(s, ids):  # type: ignore[no-untyped-def]
        checked_out.append(store.engine.pool.checkedout())  # type: ignore[attr-defined]
        return refuse(s, ids)

    mp = pytest.MonkeyPatch()
    mp.setattr(Store, "_refuse_missing_actions", staticmethod(counted))
    try:
        with caplog.at_level(logging.WARNING, logger="psycopg"):
            with pytest.raises(KeyError, match="424242"):
                store.journal(
                    [(aid, "applied", "ok"), (424_242, "applied", "ok")],
                    [FieldWrite(WEB_TARGET, "spec.replicas", 5, "bad\x00version", 20.0)],
                    20.0,
                )
            with pytest.raises(KeyError, match="424242"):
                store.journal(
                    [(424_242, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)], 20.0
                )
    finally:
        mp.undo()
    assert checked_out == [1, 1]  # the check's own connection only
    assert not [r for r in caplog.records if r.name.startswith("psycopg")], caplog.text
    assert store.managed_field(WEB_TARGET) is None and [a.state for a in store.actions()] == ["planned"]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_journal_on_a_libpq_without_pipeline_mode_takes_the_core_path(db_url: str) -> None:
    """libpq before 14 (or psycopg's pure-Python build on one) has no pipeline mode: the journal
    uses the Core path there, where every journal failed with "pipeline mode not supported" (audit)."""
    import psycopg

    from storage.store import FieldWrite

    mp = pytest.MonkeyPatch()
    mp.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda cls: False))
    try:
        store = Store(db_url)
        assert not store._pipelined
        _, (aid,) = store.record_plan(_plan(), source="test")
        store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)], 20.0)
        with pytest.raises(KeyError, match="777"):
            store.journal([(777, "applied", "ok")], [], 21.0)
    finally:
        mp.undo()
    assert [a.state for a in store.actions()] == ["applied"]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_journal_on_postgresql_after_the_server_dropped_the_connection(db_url: str) -> None:
    """The server ends the store's connections (a restart, a failover): the next journal raises
    SQLAlchemy's ``OperationalError`` (the daemon's loop retries those), the pool's dead
    connections are discarded, and the one after writes on a new connection."""
    import psycopg
    from sqlalchemy.exc import OperationalError

    from storage.store import FieldWrite

    store = Store(db_url)
    _, (aid,) = store.record_plan(_plan(), source="test")
    store.journal([], [FieldWrite(WEB_TARGET, "spec.replicas", 4, "8", 19.0)], 19.0)
    idle = [store.engine.raw_connection() for _ in range(4)]  # four connections waiting in the pool
    for c in idle:
        c.close()
    admin = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert ended is not None and ended[0] >= 1
    with pytest.raises(OperationalError):
        store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)], 20.0)
    # one failure, not one per dead connection: the pool's other connections are replaced too (an
    # audit saw each of them fail a journal in turn, as a failover would make them all dead)
    store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 21.0)], 21.0)
    record = store.managed_field(WEB_TARGET)
    assert record is not None and (record.value, record.written_at) == (5, 21.0)
    assert [a.state for a in store.actions()] == ["applied"]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_field_record_read_on_postgresql_is_one_statement_without_a_transaction(db_url: str) -> None:
    """``managed_field`` (reconcile reads one per row) runs in autocommit on PostgreSQL: the SELECT
    alone, no BEGIN and COMMIT around it (one round trip instead of three); the connection goes back
    to the pool as it came (the next transaction is a transaction)."""
    from storage.store import FieldWrite

    store = Store(db_url)
    store.journal([], [FieldWrite(WEB_TARGET, "spec.replicas", 4, "8", 19.0)], 19.0)
    seen: list[bool] = []
    with store._read() as conn:
        seen.append(conn.connection.driver_connection.autocommit)  # type: ignore[union-attr]
    record = store.managed_field(WEB_TARGET)
    assert seen == [True] and record is not None and record.value == 4
    raw = store.engine.raw_connection()
    try:
        assert raw.driver_connection.autocommit is False  # type: ignore[union-attr]
    finally:
        raw.close()
    with store._transaction() as conn:
        assert conn.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("raised", [KeyError("not ours"), KeyboardInterrupt()], ids=["KeyError", "interrupt"])
def test_journal_stopped_mid_pipeline_raises_what_stopped_it_and_pools_no_autocommit_connection(
    db_url: str, raised: BaseException
) -> None:
    """Something raised while the pipeline's transaction is open (an interrupt; a ``KeyError`` that
    is not the missing-row check's): it is what the caller sees, nothing is written, and the
    connection is not pooled in autocommit (an audit saw a ``ProgrammingError`` replace the
    exception, and the next session on that connection commit each statement at once)."""
    import psycopg

    from storage.store import FieldWrite

    store = Store(db_url)
    _, (aid,) = store.record_plan(_plan(), source="test")
    executemany = psycopg.Cursor.executemany
    calls = [0]

    def stop_at_the_second(cur, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 2:  # the upserts, after BEGIN and the outcomes' UPDATE were sent
            raise raised
        return executemany(cur, query, params_seq, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(psycopg.Cursor, "executemany", stop_at_the_second)
    try:
        with pytest.raises(type(raised)):
            store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 20.0)], 20.0)
    finally:
        mp.undo()
    assert store.managed_field(WEB_TARGET) is None and [a.state for a in store.actions()] == ["planned"]
    # every pooled connection's transactions are transactions again: a session that fails half-way
    # leaves nothing (with autocommit left on, its first UPDATE stayed)
    from sqlalchemy import update as sa_update

    from storage.schema import ActionRow

    def half_way() -> None:
        with store.session() as s:
            s.execute(sa_update(ActionRow).values(outcome="half-written"))
            raise RuntimeError("stop")

    for _ in range(3):
        with pytest.raises(RuntimeError):
            half_way()
    assert [a.outcome for a in store.actions()] != ["half-written"]
    store.journal([(aid, "applied", "ok")], [FieldWrite(WEB_TARGET, "spec.replicas", 5, "9", 21.0)], 21.0)
    assert [a.state for a in store.actions()] == ["applied"]
    store.close()


def test_journal_refuses_a_field_record_longer_than_its_column_before_writing_anything(db_url: str) -> None:
    """A record's string longer than its column is refused (``ValueTooLong``) before anything of the
    transaction is written, on SQLite too (which would store it: the ORM's flush used to check a new
    record, the journal's Core statements do not)."""
    from storage.store import FieldWrite, ValueTooLong

    store = Store(db_url)
    _, (aid,) = store.record_plan(_plan(), source="test")
    with pytest.raises(ValueTooLong, match="resource_version"):
        store.journal(
            [(aid, "applied", "ok")], [FieldWrite("Deployment/default/web", "spec.replicas", 5, "r" * 65, 10.0)], 10.0
        )
    assert store.managed_field("Deployment/default/web") is None
    assert [a.state for a in store.actions()] == ["planned"]
    store.close()
