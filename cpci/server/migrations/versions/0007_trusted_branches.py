"""The branch a PR merges into, and each repository's default branch

Only trusted branch runs (CPCI_TRUSTED_BRANCHES, by default the repository's default branch)
judge a pull request, and a PR is judged against its own base branch: PR runs record the branch
they merge into (GitHub's base_ref), repositories the default branch GitHub reports for them.
Both nullable: runs uploaded before, or by older uploaders, are compared with the default
trusted branch; a repository whose default branch is unknown trusts `main`. Commit links say
whether a trusted branch sent them: those stored before are not known to be, so a trusted
branch's conflicting link replaces them (a feature branch may have claimed main's history).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("base_branch", sa.String(length=255), nullable=True))
    with op.batch_alter_table("repository") as batch:
        batch.add_column(sa.Column("default_branch", sa.String(length=255), nullable=True))
    with op.batch_alter_table("commit_parent") as batch:
        batch.add_column(
            sa.Column("trusted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("commit_parent") as batch:
        batch.alter_column("trusted", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("commit_parent") as batch:
        batch.drop_column("trusted")
    with op.batch_alter_table("repository") as batch:
        batch.drop_column("default_branch")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("base_branch")
