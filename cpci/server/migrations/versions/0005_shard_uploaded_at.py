"""Shards indexed by upload time, for the uploads-per-hour quota

The quota reads a repository's shards stored in the last hour, newest first, at every upload;
with this index that costs the last hour's shards, not the repository's whole history.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_shard_uploaded_at"), "shard", ["uploaded_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_shard_uploaded_at"), table_name="shard")
