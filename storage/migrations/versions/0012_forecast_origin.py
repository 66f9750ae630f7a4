"""forecasts: an index on ``origin`` alone, for the prune job's batched deletes

Revision ID: 0012_forecast_origin
Revises: 0011_managed_uid

The prune job deletes the forecasts older than the retention (``origin < T``) in batches of a few
thousand rows, each its own short transaction (until 2026-12-06 in one transaction, which on SQLite
held the write lock for about 100 s for one day of 10,000 workloads and made the loop's writes fail
with "database is locked"). ``ix_forecasts_workload_origin`` starts with ``workload_id``, so each
batch would scan the table: this index finds the old rows directly.

Building it reads the whole table once (about a minute per 100 million rows; PostgreSQL blocks
writes to ``forecasts`` meanwhile). The downgrade drops the index and keeps the rows.
"""

from alembic import op


revision = '0012_forecast_origin'
down_revision = '0011_managed_uid'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_forecasts_origin', 'forecasts', ['origin'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_forecasts_origin', table_name='forecasts')
