"""Replicas starting at once against one fresh PostgreSQL database each migrate it: an advisory
lock makes them take turns, so both succeed and the schema is built once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpci.server.core import migrate
from cpci.server.core.db import create_db_engine
from tests.server.databases import fresh_database

REPO_ROOT = Path(__file__).parents[3]


def test_processes_migrating_one_fresh_database_at_once_all_succeed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Without the lock, 4 processes fail with a UniqueViolation on pg_type (two create a table
    at once); 3 make the race likely while the test stays short."""
    processes = 3
    url = fresh_database("postgresql", request, tmp_path, migrated=False)
    env = {**os.environ, "CPCI_DATABASE_URL": url}
    # Each process imports first, then waits at a shared gate (a pipe it reads EOF from when
    # the test closes it), so all of them reach the migration together.
    gate_read, gate_write = os.pipe()
    script = (
        "import os, sys\n"
        "from cpci.server.core import migrate\n"
        "from cpci.server.core.db import create_db_engine\n"
        "engine = create_db_engine(os.environ['CPCI_DATABASE_URL'])\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        f"os.read({gate_read}, 1)\n"
        "migrate.upgrade(engine)\n"
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            cwd=REPO_ROOT,
            pass_fds=(gate_read,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    os.close(gate_read)
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n"
    os.close(gate_write)  # every process's read returns now
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr
    engine = create_db_engine(url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()
