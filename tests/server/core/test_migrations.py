"""Migrations on both engines: they build exactly the models' tables, and go down again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, delete, func, select

from cpci.server.core import migrate
from cpci.server.core.db import create_db_engine
from cpci.server.crud.common import metric_names
from cpci.server.models import Result, ResultDetail
from cpci.server.packed import unpack_batch, unpack_metrics
from tests.server.databases import ENGINES, fresh_database

TABLES = {
    "repository",
    "upload_token",
    "environment",
    "run",
    "shard",
    "config",
    "result",
    "commit_parent",
    "alembic_version",
    "github_delivery",
    "github_pull_state",
    "quarantine",
    "result_detail",
    "metric_name",
    "result_rollup",
}


@pytest.mark.parametrize("kind", ENGINES)
def test_upgrade_matches_models_and_downgrade_removes_them(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        assert migrate.current_revision(engine) is None
        migrate.upgrade(engine)
        migrate.upgrade(engine)  # a second run is a no-op
        assert migrate.current_revision(engine) == migrate.head_revision()
        assert set(inspect(engine).get_table_names()) == TABLES
        indexes = {i["name"] for i in inspect(engine).get_indexes("result")}
        assert "ix_result_config_id_id" in indexes
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        migrate.downgrade(engine, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ENGINES)
def test_require_current_names_the_fix(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        with pytest.raises(RuntimeError, match="run `cpci db upgrade`"):
            migrate.require_current(engine)
    finally:
        engine.dispose()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def _old_rows_at_0002(engine: Engine) -> None:
    """The schema at 0002 with `OLD_ROWS` stored in it: what the later migrations convert."""
    migrate.upgrade(engine, "0002")
    with engine.begin() as conn:
        for statement in OLD_ROWS:
            conn.execute(text(statement))


@pytest.mark.parametrize("kind", ENGINES)
def test_0003_keeps_existing_rows_and_gives_old_tokens_branch_scope(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A populated database (results referencing shards referencing runs) goes up and down:
    SQLite's table copies must not trip over the foreign keys."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        _old_rows_at_0002(engine)
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT scope FROM upload_token")).scalar_one() == "branch"
            assert conn.execute(text("SELECT leg FROM shard")).scalar_one() == ""
            assert conn.execute(text("SELECT fork FROM run")).scalar_one() in (False, 0)
            assert conn.execute(text("SELECT count(*) FROM result")).scalar_one() == 1
        with engine.begin() as conn:  # a second leg of the same shard index now fits
            conn.execute(
                text(
                    "INSERT INTO shard (id, run_id, leg, shard_index, body_sha256, "
                    "environment_id, result_count, uploaded_at) "
                    "VALUES (2, 1, 'a100', 0, 'f', 1, 0, '2026-12-01')"
                )
            )
        migrate.downgrade(engine, "0002")  # the extra leg goes; the first stays
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id FROM shard")).scalars().all() == [1]
            assert conn.execute(text("SELECT count(*) FROM result")).scalar_one() == 1
    finally:
        engine.dispose()


OLD_ROWS = (
    "INSERT INTO repository (id, name, created_at) VALUES (1, 'acme/attn', '2026-12-01')",
    "INSERT INTO upload_token (id, name, repository_id, token_sha256, created_at) "
    "VALUES (1, 'old', 1, 'e', '2026-12-01')",
    "INSERT INTO environment (id, fingerprint) VALUES (1, 'd')",
    'INSERT INTO run (id, ci_run_id, ci_attempt, "commit", shard_total, repository_id, '
    "created_at) VALUES (1, '7', 1, 'abcdef0', 1, 1, '2026-12-01')",
    "INSERT INTO shard (id, run_id, shard_index, body_sha256, environment_id, result_count, "
    "uploaded_at) VALUES (1, 1, 0, 'c', 1, 1, '2026-12-01')",
    "INSERT INTO config (id, repository_id, key, nodeid, world_size) VALUES (1, 1, 't@2', 't', 2)",
    "INSERT INTO result (id, run_id, shard_id, config_id, environment_id, outcome, duration_s, "
    "attempt, flaky) VALUES (1, 1, 1, 1, 1, 'passed', 1.0, 1, false)",
)


@pytest.mark.parametrize("kind", ENGINES)
def test_0006_gives_old_shards_no_plan_hash_and_goes_down_keeping_them(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Shards stored before plan hashes existed have none (so they are never flagged); going
    down drops the column and keeps every row (SQLite copies the table under its results)."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        _old_rows_at_0002(engine)
        migrate.upgrade(engine, "0005")
        migrate.upgrade(engine)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT plan_sha256 FROM shard")).scalar_one() is None
            conn.execute(text("UPDATE shard SET plan_sha256 = :h"), {"h": "a" * 64})
        migrate.downgrade(engine, "0005")
        assert "plan_sha256" not in {c["name"] for c in inspect(engine).get_columns("shard")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM result")).scalar_one() == 1
            assert conn.execute(text("SELECT id FROM shard")).scalars().all() == [1]
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ENGINES)
def test_0008_scopes_runs_by_their_pull_request_and_goes_down_keeping_the_branch_run(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Old runs get the scope their pull request says; a PR run sharing a branch run's id and
    attempt fits after, and going down drops it (with its shard and results), not the branch's."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        _old_rows_at_0002(engine)
        with engine.begin() as conn:
            conn.execute(
                text(
                    'INSERT INTO run (id, ci_run_id, ci_attempt, "commit", pull_request, '
                    "shard_total, repository_id, created_at) "
                    "VALUES (2, '8', 1, 'abcdef1', 3, 1, 1, '2026-12-01')"
                )
            )
        migrate.upgrade(engine, "0008")
        with engine.begin() as conn:
            scopes = conn.execute(text("SELECT id, scope FROM run ORDER BY id")).all()
            assert [tuple(row) for row in scopes] == [(1, "branch"), (2, "pr")]
            conn.execute(
                text(
                    'INSERT INTO run (id, ci_run_id, ci_attempt, "commit", pull_request, scope, '
                    "shard_total, repository_id, created_at, fork) "
                    "VALUES (3, '7', 1, 'abcdef2', 3, 'pr', 1, 1, '2026-12-01', false)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO shard (id, run_id, leg, shard_index, body_sha256, "
                    "environment_id, result_count, uploaded_at) "
                    "VALUES (3, 3, '', 0, 'g', 1, 1, '2026-12-01')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO result (id, run_id, shard_id, config_id, environment_id, "
                    "outcome, duration_s, attempt, flaky) "
                    "VALUES (3, 3, 3, 1, 1, 'failed', 1.0, 1, false)"
                )
            )
        migrate.downgrade(engine, "0007")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id FROM run ORDER BY id")).scalars().all() == [1, 2]
            assert conn.execute(text("SELECT id FROM shard")).scalars().all() == [1]
            assert conn.execute(text("SELECT id FROM result")).scalars().all() == [1]
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ENGINES)
def test_0009_gives_old_results_no_rerun_evidence_and_one_open_quarantine_per_config(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Results stored before 0009 read as no reasons, no arrival, no order dependence; a
    config holds one open quarantine at most (a released one may stand beside a new one), and
    going down keeps every result."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    quarantine = (
        "INSERT INTO quarantine (repository_id, config_key, reason, added_by, added_at, "
        "released_at) VALUES (1, 't@2', 'flaky', 'token:1', '2026-12-01', {released})"
    )
    try:
        _old_rows_at_0002(engine)
        migrate.upgrade(engine, "0009")
        with engine.begin() as conn:
            row = conn.execute(
                text("SELECT rerun_reason, stop_reason, arrival, order_dependence FROM result")
            ).one()
            assert tuple(row) == (None, None, False, None)
            conn.execute(text(quarantine.format(released="'2026-12-02'")))
            conn.execute(text(quarantine.format(released="NULL")))
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(text(quarantine.format(released="NULL")))
        migrate.downgrade(engine, "0008")
        assert "arrival" not in {c["name"] for c in inspect(engine).get_columns("result")}
        assert "quarantine" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id FROM result")).scalars().all() == [1]
    finally:
        engine.dispose()


#: Beside OLD_ROWS' plain pass, a rerun failure at 0009 with everything a result may hold.
WIDE_RESULTS = (
    "INSERT INTO result (id, run_id, shard_id, config_id, environment_id, outcome, duration_s, "
    "attempt, flaky, isolation, rank_errors, metrics, batch, rerun_reason, stop_reason, "
    "arrival, order_dependence) VALUES (2, 1, 1, 1, 1, 'timeout', 0.1, 2, true, 'fails-alone', "
    """'[{"rank": 1, "message": "boom"}]', '{"tflops": 312.5, "max_abs_err": 0.0001}', """
    """'{"index": 3, "world": 1, "size": 8, "start_s": 2.5}', 'failed once', 'the cap', true, """
    """'{"polluters": ["t::a"], "replays": 4, "searched": 9}')""",
)
WIDE_COLUMNS = (
    "id, run_id, shard_id, config_id, environment_id, outcome, duration_s, attempt, flaky, "
    "isolation, rank_errors, metrics, batch, rerun_reason, stop_reason, arrival, "
    "order_dependence"
)


def _wide(conn: Any) -> list[tuple[Any, ...]]:
    """The 0009 layout's rows, JSON decoded and booleans as bools, on either engine."""
    rows = conn.execute(text(f"SELECT {WIDE_COLUMNS} FROM result ORDER BY id")).all()
    decode = (10, 11, 12, 16)
    return [
        tuple(
            json.loads(v) if i in decode and isinstance(v, str) else bool(v) if i in (8, 15) else v
            for i, v in enumerate(row)
        )
        for row in rows
    ]


@pytest.mark.parametrize("kind", ENGINES)
def test_0010_packs_every_result_and_unpacks_it_going_down(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Results stored wide go up packed (codes, interned metric names, a detail row only for
    the result that has details, reads through the models as before) and come down as they were;
    ids continue after the converted ones."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=False))
    try:
        _old_rows_at_0002(engine)
        migrate.upgrade(engine, "0009")
        with engine.begin() as conn:
            for statement in WIDE_RESULTS:
                conn.execute(text(statement))
            before = _wide(conn)
        migrate.upgrade(engine)
        with Session(engine) as session:
            results = session.exec(select(Result).order_by(col(Result.id))).all()
            assert [(r.outcome, r.isolation, r.attempt, r.flaky) for r in results] == [
                ("passed", None, 1, False),
                ("timeout", "fails-alone", 2, True),
            ]
            names = metric_names(session, [r.metrics for r in results])
            assert unpack_metrics(results[1].metrics, names) == {
                "tflops": 312.5,
                "max_abs_err": 0.0001,
            }
            assert unpack_batch(results[1].batch) == {
                "index": 3,
                "world": 1,
                "size": 8,
                "start_s": 2.5,
            }
            assert (results[0].metrics, results[0].batch) == (b"", b"")
            details = session.exec(select(ResultDetail)).all()
            assert [(d.result_id, d.rerun_reason, d.stop_reason) for d in details] == [
                (2, "failed once", "the cap")
            ]
            assert details[0].rank_errors == [{"rank": 1, "message": "boom"}]
            session.add(Result(duration_s=1.0, shard_id=1, config_id=1, run_id=1, outcome="passed"))
            session.commit()
            assert session.exec(select(func.max(Result.id))).one() == 3
            session.exec(delete(Result).where(col(Result.id) == 3))
            session.commit()
        migrate.downgrade(engine, "0009")
        assert "result_detail" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert _wide(conn) == before
    finally:
        engine.dispose()
