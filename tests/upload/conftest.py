"""A live result service on a loopback port (real HTTP, a migrated SQLite database)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from tests.live_server import serve

REPO = "acme/attn"


@dataclass(frozen=True)
class LiveService:
    url: str
    token: str
    database_url: str


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    database_url = f"sqlite:///{tmp_path_factory.mktemp('service') / 'cpci.db'}"
    engine = create_db_engine(database_url)
    upgrade(engine)
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO, name="tests").token
        session.commit()
    app = create_app(Settings(database_url=database_url), engine=engine)
    try:
        with serve(app) as url:
            yield LiveService(url, token, database_url)
    finally:
        engine.dispose()


def reference_junit() -> Path:
    from tests.github.contract import require_reference

    return require_reference() / "junit"
