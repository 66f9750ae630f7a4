"""managed fields: the field's value before scaleahead first wrote it (given back on release)

Revision ID: 0008_original
Revises: 0007_written
"""

from alembic import op
import sqlalchemy as sa


revision = '0008_original'
down_revision = '0007_written'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No backfill: what a field held before scaleahead's first write to it was not recorded, so an
    # existing row's original is unknown (``original_recorded`` false) and a release falls back to 0.
    with op.batch_alter_table('managed_fields') as batch:
        batch.add_column(sa.Column('original_recorded', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column('original_value', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('managed_fields') as batch:
        batch.drop_column('original_value')
        batch.drop_column('original_recorded')
