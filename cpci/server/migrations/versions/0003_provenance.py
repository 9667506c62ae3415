"""Provenance of uploads and matrix legs

Runs record who uploaded them (and whether via the fork-results workflow); upload tokens get a
scope (existing tokens become `branch`, the rights they already had); repositories remember
GitHub's numeric id; shards gain a matrix leg, so two legs' same shard index are two shards.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_COLUMNS = (
    ("upload_via", 10),
    ("uploaded_by", 500),
    ("upload_event", 50),
    ("upload_ref", 255),
    ("upload_workflow", 500),
)


def upgrade() -> None:
    with op.batch_alter_table("repository") as batch:
        batch.add_column(sa.Column("github_id", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("upload_token") as batch:
        batch.add_column(
            sa.Column("scope", sa.String(length=16), nullable=False, server_default="branch")
        )
    with op.batch_alter_table("upload_token") as batch:
        batch.alter_column("scope", server_default=None)
    with op.batch_alter_table("run") as batch:
        for name, length in RUN_COLUMNS:
            batch.add_column(sa.Column(name, sa.String(length=length), nullable=True))
        batch.add_column(sa.Column("fork", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("legs", sa.JSON(), nullable=True))
    with op.batch_alter_table("run") as batch:
        batch.alter_column("fork", server_default=None)
    with op.batch_alter_table("shard") as batch:
        batch.add_column(sa.Column("leg", sa.String(length=200), nullable=False, server_default=""))
        batch.drop_constraint("uq_shard_run_id_shard_index", type_="unique")
        batch.create_unique_constraint(
            "uq_shard_run_id_leg_shard_index", ["run_id", "leg", "shard_index"]
        )
    with op.batch_alter_table("shard") as batch:
        batch.alter_column("leg", server_default=None)


def downgrade() -> None:
    # Legs other than the first of each shard index cannot fit the old constraint: drop them
    # (and their results) rather than fail the downgrade halfway.
    op.execute(
        "DELETE FROM result WHERE shard_id IN (SELECT s.id FROM shard s WHERE EXISTS ("
        "SELECT 1 FROM shard o WHERE o.run_id = s.run_id AND o.shard_index = s.shard_index "
        "AND o.id < s.id))"
    )
    op.execute(
        "DELETE FROM shard WHERE EXISTS (SELECT 1 FROM shard o WHERE o.run_id = shard.run_id "
        "AND o.shard_index = shard.shard_index AND o.id < shard.id)"
    )
    with op.batch_alter_table("shard") as batch:
        batch.drop_constraint("uq_shard_run_id_leg_shard_index", type_="unique")
        batch.create_unique_constraint("uq_shard_run_id_shard_index", ["run_id", "shard_index"])
        batch.drop_column("leg")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("legs")
        batch.drop_column("fork")
        for name, _ in reversed(RUN_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("upload_token") as batch:
        batch.drop_column("scope")
    with op.batch_alter_table("repository") as batch:
        batch.drop_column("github_id")
