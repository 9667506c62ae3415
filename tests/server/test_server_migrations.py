"""Migrations on both engines: they build exactly the models' tables, and go down again."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import ENGINES, fresh_database
from sqlalchemy import inspect
from sqlmodel import SQLModel

from cpci.server.core import migrate
from cpci.server.core.db import create_db_engine

TABLES = {"repository", "upload_token", "environment", "run", "shard", "config", "result",
          "commit_parent", "alembic_version", "github_delivery", "github_pull_state"}  # fmt: skip


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
