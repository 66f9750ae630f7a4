"""risk factors: each service's risk-adaptation step, so a restart resumes from it

Revision ID: 0004_risk
Revises: 0003_steer
"""

from alembic import op
import sqlalchemy as sa


revision = '0004_risk'
down_revision = '0003_steer'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('risk_factors',
    sa.Column('workload', sa.String(length=512), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('slo_risk', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('workload')
    )


def downgrade() -> None:
    op.drop_table('risk_factors')
