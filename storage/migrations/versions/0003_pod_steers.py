"""pod steers: the planned node of the next pod of a controller whose pod the actuator evicts

Revision ID: 0003_steer
Revises: 0002_actuator
"""

from alembic import op
import sqlalchemy as sa


revision = '0003_steer'
down_revision = '0002_actuator'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pod_steers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('namespace', sa.String(length=253), nullable=False),
    sa.Column('owner_kind', sa.String(length=64), nullable=False),
    sa.Column('owner_name', sa.String(length=253), nullable=False),
    sa.Column('evicted_pod', sa.String(length=253), nullable=False),
    sa.Column('node', sa.String(length=253), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('consumed_by', sa.String(length=253), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_pod_steers_owner_state', 'pod_steers', ['namespace', 'owner_kind', 'owner_name', 'state'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_pod_steers_owner_state', table_name='pod_steers')
    op.drop_table('pod_steers')
