"""The service tests' databases: both engines, a fresh one per test (copied from a migrated
template, or empty for migration tests), a migrated one with an upload token (`migrate_with_token`,
what every live-service test starts from), a read-only PostgreSQL role standing in for a read
replica (`read_only_role`), and the type of the test-client factory fixture.

Fixtures live in `conftest.py`; what a test module imports lives here.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlmodel import Session

from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from tests.builders import REPO

ENGINES = ("sqlite", "postgresql")


def admin(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection to the server of `url` (to create and drop databases)."""
    u = make_url(url)
    return psycopg.connect(
        host=u.host,
        port=u.port,
        user=u.username,
        password=u.password,
        dbname=u.database or "postgres",
        autocommit=True,
    )


_counter = itertools.count()


def fresh_database(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool
) -> str:
    """The URL of a new, empty database of `kind`, dropped after the test."""
    if kind == "sqlite":
        path = tmp_path / "cpci.db"
        if migrated:
            shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    server: str = request.getfixturevalue("postgres_server")
    name = f"cpci_test_{os.getpid()}_{next(_counter)}"
    template = f" TEMPLATE {request.getfixturevalue('postgres_template')}" if migrated else ""
    with admin(server) as conn:
        conn.execute(f"CREATE DATABASE {name}{template}")

    def drop() -> None:
        with admin(server) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    request.addfinalizer(drop)
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def migrate_with_token(engine: Engine, repository: str = REPO, **token: Any) -> str:
    """Migrate `engine`'s database to head and create an upload token of `repository` (`token`:
    `name`, `scope`, as `create_token` takes them); returns the token."""
    upgrade(engine)
    with Session(engine) as session:
        created = create_token(session=session, repository=repository, **token)
        session.commit()
    return created.token


def read_only_role(database_url: str, role: str) -> str:
    """Create `role`, which may only SELECT from `database_url`'s tables, every transaction
    read-only; returns a URL that logs in as it (a stand-in for a read replica)."""
    url = make_url(database_url)
    with admin(database_url) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'ALTER ROLE "{role}" SET default_transaction_read_only = on')
        conn.execute(f'GRANT CONNECT ON DATABASE "{url.database}" TO "{role}"')
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    return url.set(username=role, password=None).render_as_string(hide_password=False)


def drop_role(database_url: str, role: str) -> None:
    """Undo `read_only_role` (its grants first, which would keep the role alive)."""
    with admin(database_url) as conn:
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')


ClientFactory = Callable[..., TestClient]
