"""Alembic environment: migrations run on the connection `cpci.server.core.migrate` hands in."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from cpci.server import models, rollup  # noqa: F401  (registers the tables on SQLModel.metadata)
from cpci.server.core.db import create_db_engine


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if _connection is not None:
    _run(_connection)
else:
    _engine = create_db_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with _engine.connect() as _conn:
        _run(_conn)
    _engine.dispose()
