"""model versions: at most one champion per family (a partial unique index); forecasts.quantiles TEXT

Revision ID: 0010_one_champion
Revises: 0009_one_running

Two promotions at once in one family (an operator's rollback and the daemon's rollout) used to
leave both versions ``champion``. A database written before this revision may hold such
duplicates: per family the newest champion (the highest id, the one the daemon and ``run`` already
followed) stays, each older ``champion`` or ``production`` version becomes ``retired``, with
``retired_at`` (now), ``retired_by_migration`` (the revision) and ``retired_by_model`` (the id
kept) in its metrics, so an operator sees why.

``forecasts.quantiles`` was VARCHAR(64): a forecast with many quantile levels (19) was stored whole
by SQLite and refused by PostgreSQL. It becomes TEXT on PostgreSQL (no table rewrite); SQLite does
not enforce the length and its column is left as it is (rewriting the largest table for a
declaration SQLite ignores is not worth it).

The downgrade drops the index only: versions retired by the upgrade stay retired, and the column
stays TEXT (earlier versions read it as well; a value longer than 64 characters could not go back).
"""

import time

from alembic import op
import sqlalchemy as sa


revision = '0010_one_champion'
down_revision = '0009_one_running'
branch_labels = None
depends_on = None

models = sa.table(
    'model_versions',
    sa.column('id', sa.Integer),
    sa.column('family', sa.String),
    sa.column('status', sa.String),
    sa.column('metrics', sa.JSON),
)
CHAMPION_STATUSES = ('champion', 'production')


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(models.c.id, models.c.family, models.c.metrics)
        .where(models.c.status.in_(CHAMPION_STATUSES))
        .order_by(models.c.id.desc())
    ).all()
    kept: dict[str, int] = {}
    now = time.time()
    for mid, family, metrics in rows:
        if family not in kept:
            kept[family] = mid  # the newest champion of its family
            continue
        note = {
            **(metrics or {}),
            'retired_at': now,
            'retired_by_migration': revision,
            'retired_by_model': kept[family],
        }
        conn.execute(sa.update(models).where(models.c.id == mid).values(status='retired', metrics=note))
    op.create_index(
        'ux_model_versions_one_champion',
        'model_versions',
        ['family'],
        unique=True,
        sqlite_where=sa.text("status IN ('champion', 'production')"),
        postgresql_where=sa.text("status IN ('champion', 'production')"),
    )
    if conn.dialect.name == 'postgresql':
        op.alter_column('forecasts', 'quantiles', type_=sa.Text(), existing_type=sa.String(64), existing_nullable=False)


def downgrade() -> None:
    op.drop_index('ux_model_versions_one_champion', table_name='model_versions')
