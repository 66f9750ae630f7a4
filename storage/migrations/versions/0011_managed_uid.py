"""managed fields: the UID of the object scaleahead wrote (a re-created object is not an edit), and
who undoes scaleahead's writes (a persistent co-writer: a GitOps tool, an operator)

Revision ID: 0011_managed_uid
Revises: 0010_one_champion

A target deleted and created again under the same name (a re-install, a GitOps prune and sync) is
a new object with a new ``metadata.uid``: its value is its own, not someone's edit of scaleahead's.
No backfill: an existing row's UID is unknown (NULL) until scaleahead's next write or read of the
object records it; until then a changed value is judged as before (an edit).

``editor`` is the field manager (``metadata.managedFields``) that made the last edit seen of the
field, ``editor_reverts`` how many of scaleahead's writes in a row it undid (0: none counted).
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
        batch.add_column(sa.Column('editor', sa.String(253), nullable=True))
        batch.add_column(sa.Column('editor_reverts', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('managed_fields') as batch:
        batch.drop_column('editor_reverts')
        batch.drop_column('editor')
        batch.drop_column('uid')
