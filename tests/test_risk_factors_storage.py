"""The risk_factors table (migrations 0004_risk, 0006_riskfp) on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import text

from storage import Store


def test_an_existing_database_upgrades_to_risk_factors_and_records_steps(db_url: str) -> None:
    old = Store(db_url, upgrade=False)
    old.upgrade("0003_steer")
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision()
    assert store.risk_factors() == {}
    store.set_risk_factors({"Deployment/dc/cpu": (3, 156.25), "Deployment/dc/web": (1, 100.0)}, 10.0)
    store.set_risk_factors({"Deployment/dc/cpu": (4, 195.3125)}, 20.0)
    assert store.risk_factors() == {"Deployment/dc/cpu": 4, "Deployment/dc/web": 1}
    store.set_risk_factors({"Deployment/dc/web": (0, 80.0), "Deployment/dc/gone": (0, 80.0)}, 30.0)
    assert store.risk_factors() == {"Deployment/dc/cpu": 4}  # back at its own weight: no row
    store.downgrade("0003_steer")
    assert store.current_revision() == "0003_steer"
    store.close()


def test_a_recorded_step_keeps_the_fingerprint_it_was_learned_under(db_url: str) -> None:
    """Migration 0006_riskfp: rows from before it read back without one; a downgrade drops the column."""
    old = Store(db_url, upgrade=False)
    old.upgrade("0005_artifact")
    with old.engine.begin() as conn:  # a row written by the previous version (its ORM had no fingerprint)
        conn.execute(text("INSERT INTO risk_factors VALUES ('Deployment/dc/cpu', 3, 156.25, 10.0)"))
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision()
    assert store.risk_factor_records() == {"Deployment/dc/cpu": (3, 156.25, None)}
    store.set_risk_factors({"Deployment/dc/cpu": (4, 195.3125, "0123456789abcdef")}, 20.0)
    store.set_risk_factors({"Deployment/dc/web": (1, 100.0, "fedcba9876543210")}, 30.0)
    assert store.risk_factor_records() == {
        "Deployment/dc/cpu": (4, 195.3125, "0123456789abcdef"),
        "Deployment/dc/web": (1, 100.0, "fedcba9876543210"),
    }
    store.downgrade("0005_artifact")
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM risk_factors ORDER BY workload")).all()
    assert [tuple(r) for r in rows] == [("Deployment/dc/cpu", 4, 195.3125, 20.0), ("Deployment/dc/web", 1, 100.0, 30.0)]
    store.close()


def test_pruning_deletes_old_steps_the_caller_does_not_keep(db_url: str) -> None:
    store = Store(db_url)
    store.set_risk_factors({"Deployment/dc/gone": (2, 125.0, "a"), "Deployment/dc/cpu": (3, 156.25, "b")}, 10.0)
    store.set_risk_factors({"Deployment/dc/new": (1, 100.0, "c")}, 100.0)
    assert store.prune_risk_factors(50.0, keep=lambda key: key == "Deployment/dc/cpu") == 1
    assert store.risk_factors() == {"Deployment/dc/cpu": 3, "Deployment/dc/new": 1}  # kept, and too recent
    store.close()
