"""Webhook deliveries become a durable work queue

A delivery keeps its payload and the SHA-256 of its body (a replayed body under a fresh GUID is
recognised), how many times its work was tried, when it is due again, and until when a worker
holds it (a lease, so a replica that dies mid-task leaves it to another).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("github_delivery") as batch:
        batch.add_column(sa.Column("digest", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("payload", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch.create_unique_constraint(op.f("uq_github_delivery_digest"), ["digest"])
        batch.create_index(
            op.f("ix_github_delivery_next_attempt_at"), ["next_attempt_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("github_delivery") as batch:
        batch.drop_index(op.f("ix_github_delivery_next_attempt_at"))
        batch.drop_constraint(op.f("uq_github_delivery_digest"), type_="unique")
        for column in ("lease_until", "next_attempt_at", "attempts", "payload", "digest"):
            batch.drop_column(column)
