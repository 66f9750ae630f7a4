"""rollouts: at most one running rollout per group (a partial unique index)

Revision ID: 0009_one_running
Revises: 0008_original

Two starts at once (the daemon's retraining and the CronJob's, or two operators) used to both
insert a running rollout in one group. A database written before this revision may hold such
duplicates: per group the newest running rollout (the highest id, the one the daemon and the CLI
already followed) stays running, and each older one becomes ``superseded`` with
``superseded_by_migration`` (the revision) and ``superseded_by_rollout`` (the id kept) in its
results, so an operator sees why it stopped. The downgrade drops the index only (rollouts
superseded by the upgrade stay superseded).
"""

from alembic import op
import sqlalchemy as sa


revision = '0009_one_running'
down_revision = '0008_original'
branch_labels = None
depends_on = None

rollouts = sa.table(
    'rollouts',
    sa.column('id', sa.Integer),
    sa.column('group', sa.String),
    sa.column('state', sa.String),
    sa.column('results', sa.JSON),
)


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(rollouts.c.id, rollouts.c.group, rollouts.c.results)
        .where(rollouts.c.state == 'running')
        .order_by(rollouts.c.id.desc())
    ).all()
    kept: dict[str, int] = {}
    for rid, group, results in rows:
        if group not in kept:
            kept[group] = rid  # the newest running rollout of its group
            continue
        note = {**(results or {}), 'superseded_by_migration': revision, 'superseded_by_rollout': kept[group]}
        conn.execute(sa.update(rollouts).where(rollouts.c.id == rid).values(state='superseded', results=note))
    op.create_index(
        'ux_rollouts_one_running',
        'rollouts',
        ['group'],
        unique=True,
        sqlite_where=sa.text("state = 'running'"),
        postgresql_where=sa.text("state = 'running'"),
    )


def downgrade() -> None:
    op.drop_index('ux_rollouts_one_running', table_name='rollouts')
