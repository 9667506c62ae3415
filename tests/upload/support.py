"""What the uploader's, the Action's and the command line's tests share: a live result service
on a loopback port (real HTTP, a migrated SQLite database), results files to send it (the
records and envelopes themselves are `tests.builders`'), the `cpci upload` arguments that send
them, and a plain loopback HTTP server for stand-ins (an attacker's URL, a proxy)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from cpci.schema import ResultRecord, ShardProgress, UploadReceipt
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.builders import REPO
from tests.live_server import serve
from tests.server.databases import migrate_with_token

Completed = subprocess.CompletedProcess[str]


@dataclass(frozen=True)
class LiveService:
    url: str
    token: str
    database_url: str


@dataclass(frozen=True)
class Database:
    """A migrated SQLite database with an upload token for REPO."""

    engine: Engine
    url: str
    token: str


def migrated_database(folder: Path) -> Database:
    url = f"sqlite:///{folder / 'cpci.db'}"
    engine = create_db_engine(url)
    return Database(engine, url, migrate_with_token(engine, name="tests"))


@contextmanager
def live_service(database: Database, sock: socket.socket | None = None) -> Iterator[LiveService]:
    """The service over `database`, served by uvicorn on `sock` (a fresh loopback one)."""
    app = create_app(Settings(database_url=database.url), engine=database.engine)
    with serve(app, sock) as url:
        yield LiveService(url, database.token, database.url)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """One live service per test module."""
    database = migrated_database(tmp_path_factory.mktemp("service"))
    try:
        with live_service(database) as live:
            yield live
    finally:
        database.engine.dispose()


def receipt_body(run: str = "1", results: int = 1) -> bytes:
    """The service's answer to a one-shard run's upload, for stand-ins that answer 201."""
    shards = ShardProgress(reported=1, expected=1, missing=[])
    receipt = UploadReceipt(
        status="stored",
        repository=REPO,
        ci_run_id=run,
        ci_attempt=1,
        shard_index=0,
        results=results,
        shards=shards,
        run_api_url=f"/api/v1/repos/{REPO}/runs/{run}",
        run_url=f"/ui/{REPO}/runs/{run}",
    )
    return receipt.model_dump_json().encode()


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


#: Who commits in the tests' git checkouts.
GIT_IDENTITY = ("-c", "user.name=cpci tests", "-c", "user.email=tests@cpci.invalid")


def git(folder: Path, *args: str) -> str:
    """`git ARGS` in `folder` (checked); its output, stripped."""
    done = subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=folder, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def git_checkout(folder: Path, branch: str = "trial") -> str:
    """A git checkout at `folder` with one commit on `branch`, as a user's project would be;
    returns the commit."""
    folder.mkdir(exist_ok=True)
    git(folder, "init", "-q", "-b", branch)
    git(folder, "commit", "-q", "--allow-empty", "-m", "first")
    return git(folder, "rev-parse", "HEAD")


def run_cpci(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> Completed:
    """`python -m cpci ARGS` in its own process as in a fresh job: none of this process's
    `CPCI_*` or `GITHUB_*` variables, only those in `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CPCI_", "GITHUB_"))}
    return subprocess.run(
        [sys.executable, "-m", "cpci", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def action_env(cwd: Path, **inputs: str) -> dict[str, str]:
    """What action.yml hands `cpci action` for these inputs (`batch_size="4"` is the input
    `batch-size`), with the step summary and outputs files in `cwd`."""
    env = {f"CPCI_INPUT_{name.upper()}": value for name, value in inputs.items()}
    env["GITHUB_STEP_SUMMARY"] = str(cwd / "summary.md")
    env["GITHUB_OUTPUT"] = str(cwd / "outputs.txt")
    return env


def reference_junit() -> Path:
    from tests.github.contract import require_reference

    return require_reference() / "junit"
