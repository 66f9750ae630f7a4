"""Alembic environment: the connection comes from ``Store`` (``config.attributes['connection']``)."""

from __future__ import annotations

from alembic import context

from storage.schema import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
