"""Results in the fewest bytes

A result row keeps numbers only (`cpci.server.packed`): its environment is its shard's, its run
id is no longer indexed (a run's results are read through its shards), outcome and isolation are
small codes, metrics are
(interned name id, float64) pairs and the batch four numbers, packed. Rank errors, rerun and stop
reasons and order dependence, which most results lack, move to `result_detail`, a row only for
the results that have any. Every existing result is converted, both ways: going down rebuilds
the wide table, the environment taken from the shard again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from cpci.server.packed import (
    ISOLATION_CODE,
    ISOLATION_NAME,
    OUTCOME_CODE,
    OUTCOME_NAME,
    pack_batch,
    pack_metrics,
    unpack_batch,
    unpack_metrics,
)

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
#: Rows converted per statement.
CHUNK = 10_000
_DETAILS = ("rank_errors", "rerun_reason", "stop_reason", "order_dependence")


def _move_aside(table: str, indexes: Sequence[str]) -> None:
    """Rename `table` to `{table}_old` with its indexes dropped, so a new `table` can take the
    names of its key, sequence and indexes."""
    for index in indexes:
        op.drop_index(index, table_name=table)
    op.rename_table(table, f"{table}_old")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {table}_old RENAME CONSTRAINT pk_{table} TO pk_{table}_old")
        op.execute(f"ALTER SEQUENCE {table}_id_seq RENAME TO {table}_old_id_seq")
        for fk in op.get_bind().execute(
            sa.text(
                "SELECT conname FROM pg_constraint WHERE conrelid = CAST(:t AS regclass) "
                "AND contype = 'f'"
            ),
            {"t": f"{table}_old"},
        ):
            op.execute(f"ALTER TABLE {table}_old DROP CONSTRAINT {fk[0]}")


def _rows(sql: str) -> Iterator[list[Any]]:
    """The rows of `sql` (which selects `id` first, and ends before its ORDER BY), in chunks."""
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.text(f"{sql} AND r.id > :last ORDER BY r.id LIMIT {CHUNK}"), {"last": last}
        ).all()
        if not rows:
            return
        yield [tuple(r) for r in rows]
        last = rows[-1][0]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _sync_sequence(table: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"SELECT setval('{table}_id_seq', COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, "
            "false)"
        )


def upgrade() -> None:
    op.create_table(
        "metric_name",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_name")),
        sa.UniqueConstraint("name", name=op.f("uq_metric_name_name")),
    )
    _move_aside("result", ("ix_result_config_id_id", "ix_result_run_id", "ix_result_shard_id"))
    result = op.create_table(
        "result",
        sa.Column("id", _ID, nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("shard_id", sa.Integer(), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.SmallInteger(), nullable=False),
        sa.Column("isolation", sa.SmallInteger(), nullable=False),
        sa.Column("flaky", sa.Boolean(), nullable=False),
        sa.Column("arrival", sa.Boolean(), nullable=False),
        sa.Column("metrics", sa.LargeBinary(), nullable=False),
        sa.Column("batch", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["config_id"], ["config.id"], name=op.f("fk_result_config_id_config")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_result_run_id_run")),
        sa.ForeignKeyConstraint(["shard_id"], ["shard.id"], name=op.f("fk_result_shard_id_shard")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result")),
    )
    detail = op.create_table(
        "result_detail",
        sa.Column("result_id", _ID, autoincrement=False, nullable=False),
        sa.Column("rank_errors", sa.JSON(), nullable=True),
        sa.Column("rerun_reason", sa.String(length=2000), nullable=True),
        sa.Column("stop_reason", sa.String(length=2000), nullable=True),
        sa.Column("order_dependence", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["result_id"], ["result.id"], name=op.f("fk_result_detail_result_id_result")
        ),
        sa.PrimaryKeyConstraint("result_id", name=op.f("pk_result_detail")),
    )
    metric_name = sa.table("metric_name", sa.column("id"), sa.column("name"))
    bind = op.get_bind()
    names: dict[str, int] = {}
    old = (
        "SELECT r.id, r.duration_s, r.shard_id, r.config_id, r.run_id, r.attempt, r.outcome, "
        "r.isolation, r.flaky, r.arrival, r.metrics, r.batch, r.rank_errors, r.rerun_reason, "
        "r.stop_reason, r.order_dependence FROM result_old r WHERE 1 = 1"
    )
    for chunk in _rows(old):
        rows, details = [], []
        for row in chunk:
            pk, took, shard, config, run, attempt, outcome, isolation, flaky, arrival = row[:10]
            metrics, batch = _json(row[10]) or {}, _json(row[11])
            for name in metrics:
                if name not in names:
                    names[name] = len(names) + 1
                    bind.execute(sa.insert(metric_name), {"id": names[name], "name": name})
            rows.append(
                {
                    "id": pk,
                    "duration_s": took,
                    "shard_id": shard,
                    "config_id": config,
                    "run_id": run,
                    "attempt": attempt,
                    "outcome": OUTCOME_CODE[outcome],
                    "isolation": ISOLATION_CODE[isolation],
                    "flaky": bool(flaky),
                    "arrival": bool(arrival),
                    "metrics": pack_metrics([metrics], names)[0],
                    "batch": pack_batch(batch),
                }
            )
            extra = dict(zip(_DETAILS, row[12:], strict=True))
            extra["rank_errors"] = _json(extra["rank_errors"]) or None
            extra["order_dependence"] = _json(extra["order_dependence"])
            if any(v is not None for v in extra.values()):
                details.append({"result_id": pk, **extra})
        bind.execute(sa.insert(result), rows)
        if details:
            bind.execute(sa.insert(detail), details)
    op.drop_table("result_old")
    _sync_sequence("metric_name")
    _sync_sequence("result")
    op.create_index("ix_result_config_id_id", "result", ["config_id", "id"], unique=False)
    op.create_index("ix_result_shard_id", "result", ["shard_id"], unique=False)


def downgrade() -> None:
    _move_aside("result", ("ix_result_config_id_id", "ix_result_shard_id"))
    result = op.create_table(
        "result",
        sa.Column("id", _ID, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("shard_id", sa.Integer(), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("flaky", sa.Boolean(), nullable=False),
        sa.Column("isolation", sa.String(length=32), nullable=True),
        sa.Column("rank_errors", sa.JSON(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("batch", sa.JSON(), nullable=True),
        sa.Column("rerun_reason", sa.String(length=2000), nullable=True),
        sa.Column("stop_reason", sa.String(length=2000), nullable=True),
        sa.Column("arrival", sa.Boolean(), nullable=False),
        sa.Column("order_dependence", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["config_id"], ["config.id"], name=op.f("fk_result_config_id_config")
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_result_environment_id_environment"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_result_run_id_run")),
        sa.ForeignKeyConstraint(["shard_id"], ["shard.id"], name=op.f("fk_result_shard_id_shard")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result")),
    )
    bind = op.get_bind()
    names: dict[int, str] = dict(bind.execute(sa.text("SELECT id, name FROM metric_name")).all())
    packed = (
        "SELECT r.id, r.run_id, r.shard_id, r.config_id, s.environment_id, r.outcome, "
        "r.duration_s, r.attempt, r.flaky, r.isolation, d.rank_errors, r.metrics, r.batch, "
        "d.rerun_reason, d.stop_reason, r.arrival, d.order_dependence FROM result_old r "
        "JOIN shard s ON s.id = r.shard_id LEFT JOIN result_detail d ON d.result_id = r.id "
        "WHERE 1 = 1"
    )
    for chunk in _rows(packed):
        bind.execute(
            sa.insert(result),
            [
                {
                    "id": row[0],
                    "run_id": row[1],
                    "shard_id": row[2],
                    "config_id": row[3],
                    "environment_id": row[4],
                    "outcome": OUTCOME_NAME[row[5]],
                    "duration_s": row[6],
                    "attempt": row[7],
                    "flaky": bool(row[8]),
                    "isolation": ISOLATION_NAME[row[9]],
                    "rank_errors": _json(row[10]),
                    "metrics": unpack_metrics(row[11], names) or None,
                    "batch": unpack_batch(row[12]),
                    "rerun_reason": row[13],
                    "stop_reason": row[14],
                    "arrival": bool(row[15]),
                    "order_dependence": _json(row[16]),
                }
                for row in chunk
            ],
        )
    op.drop_table("result_detail")
    op.drop_table("result_old")
    op.drop_table("metric_name")
    _sync_sequence("result")
    op.create_index("ix_result_config_id_id", "result", ["config_id", "id"], unique=False)
    op.create_index("ix_result_run_id", "result", ["run_id"], unique=False)
    op.create_index("ix_result_shard_id", "result", ["shard_id"], unique=False)
