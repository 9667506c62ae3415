"""What reruns and bisection found, and quarantines

Results keep why a rerun happened (`rerun_reason`), why the reruns stopped (`stop_reason`),
whether the result is one of a new config's arrival runs (`arrival`) and what bisecting an
order-dependent failure found (`order_dependence`, JSON). Older results have none of them:
null, and `arrival` false. Quarantines are a table of their own, at most one open per config.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN = sa.text("released_at IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("result") as batch:
        batch.add_column(sa.Column("rerun_reason", sa.String(length=2000), nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.String(length=2000), nullable=True))
        batch.add_column(
            sa.Column("arrival", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("order_dependence", sa.JSON(), nullable=True))
    with op.batch_alter_table("result") as batch:
        batch.alter_column("arrival", server_default=None)
    op.create_table(
        "quarantine",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("config_key", sa.String(length=2100), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("added_by", sa.String(length=500), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_by", sa.String(length=500), nullable=True),
        sa.Column("release_note", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_quarantine_repository_id_repository"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantine")),
    )
    op.create_index(
        "uq_quarantine_open",
        "quarantine",
        ["repository_id", "config_key"],
        unique=True,
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )


def downgrade() -> None:
    op.drop_index("uq_quarantine_open", table_name="quarantine")
    op.drop_table("quarantine")
    with op.batch_alter_table("result") as batch:
        for column in ("order_dependence", "arrival", "stop_reason", "rerun_reason"):
            batch.drop_column(column)
