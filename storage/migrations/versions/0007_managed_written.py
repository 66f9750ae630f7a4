"""managed fields: the value scaleahead last confirmed writing (not an intent, not a baseline)

Revision ID: 0007_written
Revises: 0006_riskfp
"""

from alembic import op
import sqlalchemy as sa


revision = '0007_written'
down_revision = '0006_riskfp'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No backfill: a row's ``value`` may be the field's value before a write that never landed (the
    # baseline the human-edit check falls back to), which is not scaleahead's to hand back.
    with op.batch_alter_table('managed_fields') as batch:
        batch.add_column(sa.Column('written_value', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('managed_fields') as batch:
        batch.drop_column('written_value')
