"""model artifacts: each model version's checkpoint bytes, loadable by every replica

Revision ID: 0005_artifact
Revises: 0004_risk
"""

from alembic import op
import sqlalchemy as sa


revision = '0005_artifact'
down_revision = '0004_risk'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('model_artifacts',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['model_versions.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id')
    )


def downgrade() -> None:
    op.drop_table('model_artifacts')
