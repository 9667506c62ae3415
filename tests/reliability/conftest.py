"""Databases for the reliability tests: SQLite files and a throwaway PostgreSQL server.

PostgreSQL comes from `CPCI_TEST_POSTGRES_URL` when set, else from the local binaries (as in
tests/server); without either the PostgreSQL half skips, except under CI, where it must run.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from cpci.server.devpg import find_binaries, throwaway_postgres

ENGINES = ("sqlite", "postgresql")
_counter = itertools.count()


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    url = os.environ.get("CPCI_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    bindir = find_binaries()
    if bindir is None:
        message = "PostgreSQL binaries (initdb, pg_ctl) not found; set CPCI_TEST_POSTGRES_URL"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so the PostgreSQL tests must run)")
        pytest.skip(message)
    with throwaway_postgres(bindir) as admin_url:
        yield admin_url


def new_database(kind: str, request: pytest.FixtureRequest, directory: Path) -> str:
    """The URL of a new, empty database of `kind` (not migrated), dropped at teardown."""
    if kind == "sqlite":
        return f"sqlite:///{directory / f'cpci-{next(_counter)}.db'}"
    admin: str = request.getfixturevalue("postgres_admin_url")
    name = f"cpci_rel_{os.getpid()}_{next(_counter)}"
    u = make_url(admin)
    connect = {
        "host": u.host, "port": u.port, "user": u.username, "password": u.password,
        "dbname": u.database or "postgres", "autocommit": True,
    }  # fmt: skip
    with psycopg.connect(**connect) as conn:
        conn.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(**connect) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    request.addfinalizer(drop)
    return u.set(database=name).render_as_string(hide_password=False)
