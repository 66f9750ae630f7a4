"""managed fields: what the actuator last wrote, and human edits seen on those fields

Revision ID: 0002_actuator
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa


revision = '0002_actuator'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('managed_fields',
    sa.Column('target', sa.String(length=512), nullable=False),
    sa.Column('field', sa.String(length=253), nullable=False),
    sa.Column('value', sa.Integer(), nullable=False),
    sa.Column('resource_version', sa.String(length=64), nullable=False),
    sa.Column('written_at', sa.Float(), nullable=False),
    sa.Column('human_value', sa.Integer(), nullable=True),
    sa.Column('human_seen_at', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('target')
    )


def downgrade() -> None:
    op.drop_table('managed_fields')
