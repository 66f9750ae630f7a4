"""outcomes: each service's measured outcome per 5-minute bucket, for rollouts decided on them

Revision ID: 0013_outcomes
Revises: 0012_forecast_origin

The control loop's leader records, per service and bucket, the control steps it scored, those
short of capacity, the capacity run and the demand served, and the scored forecasts' errors, with
the rollout and arm that acted (``scaleahead.outcomes``). ``scaleahead rollout evaluate --measured``
and the daemon's canary evaluation sum them. The downgrade drops the table and its rows.
"""

from alembic import op
import sqlalchemy as sa


revision = '0013_outcomes'
down_revision = '0012_forecast_origin'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('outcomes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('workload', sa.String(length=512), nullable=False),
    sa.Column('bucket', sa.Float(), nullable=False),
    sa.Column('rollout_id', sa.Integer(), nullable=False),
    sa.Column('arm', sa.String(length=16), nullable=False),
    sa.Column('model_version_id', sa.Integer(), nullable=True),
    sa.Column('steps', sa.Integer(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=False),
    sa.Column('short_steps', sa.Integer(), nullable=False),
    sa.Column('fallback_steps', sa.Integer(), nullable=False),
    sa.Column('capacity_seconds', sa.Float(), nullable=False),
    sa.Column('demand_seconds', sa.Float(), nullable=False),
    sa.Column('error_abs', sa.Float(), nullable=False),
    sa.Column('error_actual', sa.Float(), nullable=False),
    sa.Column('forecasts', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_outcomes_rollout_bucket', 'outcomes', ['rollout_id', 'bucket'], unique=False)
    op.create_index('ix_outcomes_workload_bucket', 'outcomes', ['workload', 'bucket'], unique=False)
    op.create_index('ix_outcomes_bucket', 'outcomes', ['bucket'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_outcomes_bucket', table_name='outcomes')
    op.drop_index('ix_outcomes_workload_bucket', table_name='outcomes')
    op.drop_index('ix_outcomes_rollout_bucket', table_name='outcomes')
    op.drop_table('outcomes')
