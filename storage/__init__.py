"""Persistence of workloads, model versions, forecasts, plans, actions and rollouts.

SQLAlchemy 2 with Alembic migrations; SQLite by default, PostgreSQL by URL. Only this package
imports sqlalchemy.
"""

from storage.store import Store, default_db_url

__all__ = ["Store", "default_db_url"]
