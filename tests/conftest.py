"""Fixtures shared by every part's tests.

Every test runs without the CI's own variables (`GITHUB_*`, `RUNNER_*`, `ACTIONS_*`) and without
cpci's settings (`CPCI_*`, but for the tests' own `CPCI_TEST_*`): the uploader, the Action and
the service read them, so a test run inside a GitHub pull-request job, or a shell with a
`CPCI_TOKEN`, would otherwise take that job or token for its own. A test that wants one sets it.

`postgres_server`: an admin URL of a real PostgreSQL server for the whole session, from
`CPCI_TEST_POSTGRES_URL` when set, else a throwaway server started from the local binaries (as
user `postgres` when running as root, since initdb refuses root). Without binaries the PostgreSQL
tests skip, except under CI (`CI` set), where a silently halved suite would hide engine-specific
bugs, so they fail instead. One server serves tests/server and tests/reliability alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """An admin URL of a PostgreSQL server for this session."""
    from cpci.server.devpg import find_binaries, throwaway_postgres

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


#: The variables a CI job (or a developer's shell) sets that the code under test reads.
AMBIENT_PREFIXES = ("GITHUB_", "RUNNER_", "ACTIONS_", "CPCI_")


@pytest.fixture(autouse=True)
def _no_ambient_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(AMBIENT_PREFIXES) and not name.startswith("CPCI_TEST_"):
            monkeypatch.delenv(name)
