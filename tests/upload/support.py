"""What the uploader's, the Action's and the command line's tests share: a live result service
on a loopback port (real HTTP, a migrated SQLite database), envelopes and results files to send
it, the `cpci upload` arguments that send them, and a plain loopback HTTP server for stand-ins
(an attacker's URL, a proxy)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlmodel import Session

from cpci.schema import Outcome, ResultRecord, RunEnvelope
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.tokens import create_token
from tests.live_server import serve

REPO = "acme/attn"
NODEID = "t.py::test"


@dataclass(frozen=True)
class LiveService:
    url: str
    token: str
    database_url: str


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """A migrated database with an upload token for REPO, served by uvicorn on loopback."""
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


def record(nodeid: str = NODEID, outcome: Outcome = "passed", world_size: int = 2) -> ResultRecord:
    """One config's result as the runner writes it."""
    return ResultRecord(nodeid=nodeid, world_size=world_size, outcome=outcome, duration_s=1.0)


def envelope(run: str = "1", repository: str = REPO) -> RunEnvelope:
    """A one-result envelope of CI run `run`."""
    return RunEnvelope(repository=repository, commit="a" * 40, ci_run_id=run, results=[record()])


def results_file(path: Path, records: list[ResultRecord]) -> Path:
    """Write `records` as a results file (JSON lines) at `path`."""
    path.write_text("".join(r.to_json_line() for r in records), encoding="utf-8")
    return path


def upload_args(
    service: LiveService, tmp_path: Path, results: Path, *extra: str, server: str | None = None
) -> list[str]:
    """`cpci upload` of `results` for REPO to the live service, spooling under `tmp_path`."""
    return [
        "upload",
        "--results",
        str(results),
        "--repository",
        REPO,
        "--server",
        server or service.url,
        "--token",
        service.token,
        "--spool",
        str(tmp_path / "spool"),
        *extra,
    ]


@contextmanager
def serve_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a loopback port in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def reference_junit() -> Path:
    from tests.github.contract import require_reference

    return require_reference() / "junit"
