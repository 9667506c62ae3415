"""CI run ids owned by the scope that wrote them

A pull request's credential must never add to a branch run, nor take its id before the branch's
own job uploads (the branch run's upload would then be refused, and its results lost). Runs
record the scope they were written in, `branch` (no pull request) or `pr`, and a CI run id's
attempts are unique per scope: a branch run and a PR run with the same id are two runs, and
readers show the branch run. Existing runs get the scope their pull request says.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = "uq_run_repository_id_ci_run_id_ci_attempt"
NEW_KEY = "uq_run_repository_id_ci_run_id_ci_attempt_scope"
#: PR runs that share their id and attempt with a branch run: they cannot fit the old key.
SHADOWED = (
    "SELECT p.id FROM run p WHERE p.scope = 'pr' AND EXISTS (SELECT 1 FROM run b WHERE "
    "b.scope = 'branch' AND b.repository_id = p.repository_id AND b.ci_run_id = p.ci_run_id "
    "AND b.ci_attempt = p.ci_attempt)"
)


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(
            sa.Column("scope", sa.String(length=10), nullable=False, server_default="branch")
        )
    op.execute("UPDATE run SET scope = 'pr' WHERE pull_request IS NOT NULL")
    with op.batch_alter_table("run") as batch:
        batch.alter_column("scope", server_default=None)
        batch.drop_constraint(OLD_KEY, type_="unique")
        batch.create_unique_constraint(
            NEW_KEY, ["repository_id", "ci_run_id", "ci_attempt", "scope"]
        )


def downgrade() -> None:
    # The branch run keeps the id; the PR run beside it goes with its shards and results,
    # rather than failing the downgrade halfway.
    op.execute(f"DELETE FROM result WHERE run_id IN ({SHADOWED})")
    op.execute(f"DELETE FROM shard WHERE run_id IN ({SHADOWED})")
    op.execute(f"DELETE FROM run WHERE id IN ({SHADOWED})")
    with op.batch_alter_table("run") as batch:
        batch.drop_constraint(NEW_KEY, type_="unique")
        batch.create_unique_constraint(OLD_KEY, ["repository_id", "ci_run_id", "ci_attempt"])
        batch.drop_column("scope")
