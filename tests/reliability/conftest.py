"""Databases for the reliability tests: SQLite files and a throwaway PostgreSQL server.

PostgreSQL is the session's `postgres_server` (tests/conftest.py).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

ENGINES = ("sqlite", "postgresql")
_counter = itertools.count()


def new_database(kind: str, request: pytest.FixtureRequest, directory: Path) -> str:
    """The URL of a new, empty database of `kind` (not migrated), dropped at teardown."""
    if kind == "sqlite":
        return f"sqlite:///{directory / f'cpci-{next(_counter)}.db'}"
    admin: str = request.getfixturevalue("postgres_server")
    name = f"cpci_rel_{os.getpid()}_{next(_counter)}"
    u = make_url(admin)
    connect = {
        "host": u.host,
        "port": u.port,
        "user": u.username,
        "password": u.password,
        "dbname": u.database or "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**connect) as conn:
        conn.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(**connect) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    request.addfinalizer(drop)
    return u.set(database=name).render_as_string(hide_password=False)
