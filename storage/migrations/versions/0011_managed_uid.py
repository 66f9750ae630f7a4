"""managed fields: the UID of the object scaleahead wrote (a re-created object is not an edit)

Revision ID: 0011_managed_uid
Revises: 0010_one_champion

A target deleted and created again under the same name (a re-install, a GitOps prune and sync) is
a new object with a new ``metadata.uid``: its value is its own, not someone's edit of scaleahead's.
No backfill: an existing row's UID is unknown (NULL) until scaleahead's next write or read of the
object records it; until then a changed value is judged as before (an edit).
"""

from alembic import op
import sqlalchemy as sa


revision = '0011_managed_uid'
down_revision = '0010_one_champion'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('managed_fields') as batch:
        batch.add_column(sa.Column('uid', sa.String(128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('managed_fields') as batch:
        batch.drop_column('uid')
