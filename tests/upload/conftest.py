"""A live result service on a loopback port (real HTTP, a migrated SQLite database)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token

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
    # The socket is bound and listening before the thread starts, so a client that connects
    # first simply waits in the backlog: no polling for readiness.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield LiveService(f"http://127.0.0.1:{sock.getsockname()[1]}", token, database_url)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        engine.dispose()


def reference_junit() -> Path:
    from tests.github.contract import require_reference

    return require_reference() / "junit"
