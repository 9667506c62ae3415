"""Engines for the two supported databases, tuned once here.

SQLite gets WAL (readers never wait for the writer), foreign keys, a busy timeout, and
`BEGIN IMMEDIATE` for write sessions, so two concurrent uploads queue instead of failing with
"database is locked" when both try to upgrade a read lock. PostgreSQL goes through psycopg 3,
with JIT compilation off.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url

_WRITE = "cpci_write"


def create_db_engine(url: str) -> Engine:
    """An engine for `url` (sqlite:///PATH or postgresql://...)."""
    sa_url = make_url(url)
    backend = sa_url.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(
            sa_url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8
        )
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if backend == "postgresql":
        if sa_url.drivername == "postgresql":
            sa_url = sa_url.set(drivername="postgresql+psycopg")
        engine = create_engine(sa_url, pool_pre_ping=True, pool_size=8, max_overflow=8)
        event.listen(engine, "connect", _postgres_on_connect)
        return engine
    raise ValueError(f"unsupported database {backend!r}: use sqlite:///PATH or postgresql://...")


def writer(engine: Engine) -> Engine:
    """The same engine, but its transactions take SQLite's write lock up front."""
    return engine.execution_options(**{_WRITE: True})


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, see _sqlite_on_begin
    cursor = dbapi_connection.cursor()
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
        "busy_timeout=30000",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _postgres_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # JIT pays off on queries that run for seconds over millions of rows. The service's run for
    # milliseconds, yet some are estimated costly enough to be compiled first: the newest
    # results of 500 configs (`crud.history.observations`) took 0.4 s to compile, 0.1 s to run.
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET jit = off")
    dbapi_connection.commit()  # a SET in a transaction rolled back would be undone


def _sqlite_on_begin(conn: Connection) -> None:
    mode = "IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")
