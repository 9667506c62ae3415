"""Fixtures for the result service: real SQLite files and a real PostgreSQL server (the
session's `postgres_server`, see tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from tests.builders import REPO
from tests.server.databases import ENGINES, ClientFactory, admin, fresh_database
from tests.server.oidc_keys import Keys


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """A migrated database that each test's database is copied from (fast and isolated)."""
    name = f"cpci_template_{os.getpid()}"
    with admin(postgres_server) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    engine = create_db_engine(make_url(postgres_server).set(database=name).render_as_string(False))
    upgrade(engine)
    engine.dispose()
    yield name
    with admin(postgres_server) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "cpci.db"
    engine = create_db_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(params=ENGINES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database on each engine."""
    return fresh_database(request.param, request, tmp_path, migrated=True)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = create_db_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def keys() -> Keys:
    """The module's OIDC key pair: tokens the module's JWKS publishes (`good`) or not (`evil`)."""
    return Keys()


@pytest.fixture
def token(engine: Engine) -> str:
    """An upload token for REPO."""
    with Session(engine) as session:
        created = create_token(session=session, repository=REPO, name="tests")
        session.commit()
    return created.token


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
