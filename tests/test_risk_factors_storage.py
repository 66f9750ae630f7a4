"""The risk_factors table (migration 0004_risk) on SQLite and PostgreSQL."""

from __future__ import annotations

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
