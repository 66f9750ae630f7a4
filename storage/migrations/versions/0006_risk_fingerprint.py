"""risk factor fingerprints: what each recorded step was learned under

Revision ID: 0006_riskfp
Revises: 0005_artifact
"""

from alembic import op
import sqlalchemy as sa


revision = '0006_riskfp'
down_revision = '0005_artifact'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('risk_factors') as batch:
        batch.add_column(sa.Column('fingerprint', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('risk_factors') as batch:
        batch.drop_column('fingerprint')
