"""Daily roll-ups of results older than the retention

`result_rollup` holds one row per config, environment, branch (or pull request) and UTC day
of the results `cpci db compact` rolled up (`cpci.server.rollup`). Going up adds the empty
table; going down drops it, and with it what was rolled up: compacted raw results are gone.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "result_rollup",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("pull_request", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("results", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("failed_runs", sa.Integer(), nullable=False),
        sa.Column("rerun_runs", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("flaky_passes", sa.Integer(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("outcomes", sa.JSON(), nullable=False),
        sa.Column("signatures", sa.JSON(), nullable=False),
        sa.Column("durations", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["config_id"], ["config.id"], name=op.f("fk_result_rollup_config_id_config")
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_result_rollup_environment_id_environment"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result_rollup")),
        sa.UniqueConstraint(
            "config_id",
            "environment_id",
            "branch",
            "pull_request",
            "day",
            name="uq_result_rollup_key",
        ),
    )
    op.create_index("ix_result_rollup_config_id_day", "result_rollup", ["config_id", "day"])


def downgrade() -> None:
    op.drop_index("ix_result_rollup_config_id_day", table_name="result_rollup")
    op.drop_table("result_rollup")
