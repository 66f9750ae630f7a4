"""The managed-fields table (migration 0002_actuator) on SQLite and PostgreSQL."""

from __future__ import annotations

from storage import Store


def test_an_existing_database_upgrades_to_the_managed_fields_table_and_keeps_human_edits(db_url):
    old = Store(db_url, upgrade=False)
    old.upgrade("0001")
    assert old.current_revision() == "0001"
    old.close()
    store = Store(db_url)
    assert store.current_revision() == Store.head_revision()
    assert store.managed_field("Deployment/default/web") is None
    store.set_managed_field("Deployment/default/web", "spec.replicas", 4, "101", 10.0)
    store.set_human_edit("Deployment/default/web", 9, 20.0)
    mf = store.managed_field("Deployment/default/web")
    assert (mf.value, mf.resource_version, mf.human_value, mf.human_seen_at) == (4, "101", 9, 20.0)
    store.set_managed_field("Deployment/default/web", "spec.replicas", 5, "130", 30.0)
    mf = store.managed_field("Deployment/default/web")
    assert (mf.value, mf.human_value, mf.human_seen_at) == (5, None, None)
    store.downgrade("0001")
    assert store.current_revision() == "0001"
    store.close()
