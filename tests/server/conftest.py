"""Fixtures for the result service: real SQLite files and a real PostgreSQL server (the
session's `postgres_server`, see tests/conftest.py)."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from service_builders import REPO
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token

ENGINES = ("sqlite", "postgresql")


def _admin(url: str) -> psycopg.Connection[Any]:
    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password,
        dbname=u.database or "postgres", autocommit=True,
    )  # fmt: skip


_counter = itertools.count()


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """A migrated database that each test's database is copied from (fast and isolated)."""
    name = f"cpci_template_{os.getpid()}"
    with _admin(postgres_server) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    engine = create_db_engine(make_url(postgres_server).set(database=name).render_as_string(False))
    upgrade(engine)
    engine.dispose()
    yield name
    with _admin(postgres_server) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "cpci.db"
    engine = create_db_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


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
    with _admin(server) as conn:
        conn.execute(f"CREATE DATABASE {name}{template}")

    def drop() -> None:
        with _admin(server) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    request.addfinalizer(drop)
    return make_url(server).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=ENGINES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database on each engine."""
    return fresh_database(request.param, request, tmp_path, migrated=True)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = create_db_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def token(engine: Engine) -> str:
    """An upload token for REPO."""
    with Session(engine) as session:
        created = create_token(session=session, repository=REPO, name="tests")
        session.commit()
    return created.token


ClientFactory = Callable[..., TestClient]


@pytest.fixture
def make_client(engine: Engine, db_url: str) -> Iterator[ClientFactory]:
    """Build a test client over this test's database with extra settings."""
    clients: list[TestClient] = []

    def make(http: Any = None, **overrides: Any) -> TestClient:
        settings = Settings(database_url=db_url, **overrides)
        client = TestClient(create_app(settings, engine=engine, oidc_http=http))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: ClientFactory, token: str) -> TestClient:
    """A client with public reads that sends REPO's upload token."""
    c = make_client()
    c.headers["Authorization"] = f"Bearer {token}"
    return c
