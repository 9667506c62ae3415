"""Each shard's plan hash, so the PR report can flag shards planned from different inputs

Shards of one run and leg must be planned from the same collected configs, durations and shard
total, or their union may miss a config or hold one twice. Nullable: shards uploaded before, or
by runners that do not write a plan, have none and are never flagged.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("shard") as batch:
        batch.add_column(sa.Column("plan_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("shard") as batch:
        batch.drop_column("plan_sha256")
