"""Alembic, driven from code: `cpci db upgrade`, `cpci serve` and the tests all come here.

Replicas may start at once against one PostgreSQL database, each migrating on start: a
transaction-scoped advisory lock makes them take turns, so the first applies the migrations
and the others find the database at head. SQLite's write lock does the same for one file.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
#: The advisory lock key migrations hold on PostgreSQL (any constant; this spells "cpci").
MIGRATION_LOCK = 0x63706369


def alembic_config(url: str = "") -> Config:
    """An Alembic config pointing at the bundled migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database's tables to `revision` (all migrations by default), in one transaction."""
    _run(engine, revision, command.upgrade)


def downgrade(engine: Engine, revision: str) -> None:
    _run(engine, revision, command.downgrade)


def _run(engine: Engine, revision: str, action: object) -> None:
    config = alembic_config()
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode copies a table and drops the old one, which SQLite refuses for a table
            # other rows reference while foreign keys are on; SQLite's own recipe is to switch
            # them off outside the transaction and check them before committing.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        try:
            with connection.begin():
                if connection.dialect.name == "postgresql":  # held until the commit
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                    )
                config.attributes["connection"] = connection
                action(config, revision)  # type: ignore[operator]
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
                    if broken is not None:
                        raise RuntimeError(f"a migration broke a foreign key: {tuple(broken)}")
        finally:
            if sqlite:
                connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the bundled migrations have a head"
    return head


def require_current(engine: Engine) -> None:
    """Fail with the fix spelled out when the database is behind the code."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        raise RuntimeError(
            f"the database is at migration {current or 'none'}, this cpci needs {head}: "
            "run `cpci db upgrade` (with the same CPCI_DATABASE_URL) first"
        )
