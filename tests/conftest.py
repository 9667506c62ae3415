"""Fixtures shared by every part's tests.

Every test runs without the CI's own variables (`GITHUB_*`, `RUNNER_*`, `ACTIONS_*`) and without
cpci's settings (`CPCI_*`, but for the tests' own `CPCI_TEST_*`): the uploader, the Action and
the service read them, so a test run inside a GitHub pull-request job, or a shell with a
`CPCI_TOKEN`, would otherwise take that job or token for its own. A test that wants one sets it.

`postgres_server`: an admin URL of a real PostgreSQL server for the whole session, from
`CPCI_TEST_POSTGRES_URL` when set, else a throwaway server started from the local binaries (as
user `postgres` when running as root, since initdb refuses root). Without binaries the PostgreSQL
tests skip, except where `CPCI_TEST_REQUIRE` promises them (`tests.prerequisites`: `.ci/run`),
where a silently halved suite would hide engine-specific bugs, so they fail instead. One server
serves tests/server and tests/reliability alike. The run ends with the count of tests skipped
for want of each prerequisite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.prerequisites import PREREQUISITES, missing, required, skipped_for_want


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
        missing("postgres", "PostgreSQL binaries (initdb, pg_ctl) not found")
    with throwaway_postgres(bindir) as admin_url:
        yield admin_url


#: The variables a CI job (or a developer's shell) sets that the code under test reads.
AMBIENT_PREFIXES = ("GITHUB_", "RUNNER_", "ACTIONS_", "CPCI_")
#: The tests' own settings, kept: CPCI_TEST_* and these.
TEST_SETTINGS = frozenset(
    {"CPCI_REFERENCE_DIR", "CPCI_ARTIFACTS", "CPCI_CHROMIUM", "CPCI_UPDATE_GOLDEN"}
)


@pytest.fixture(autouse=True)
def _no_ambient_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        own = name.startswith("CPCI_TEST_") or name in TEST_SETTINGS
        if name.startswith(AMBIENT_PREFIXES) and not own:
            monkeypatch.delenv(name)


def pytest_configure(config: pytest.Config) -> None:
    required()  # a CPCI_TEST_REQUIRE naming no prerequisite is a usage error, before any test


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The tests skipped for want of each prerequisite, so a green run says what it skipped."""
    reasons = [
        str(report.longrepr[2])
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3
    ]
    counts = skipped_for_want(reasons)
    if not counts:
        return
    terminalreporter.write_sep("-", "skipped for want of a prerequisite")
    for name, count in sorted(counts.items()):
        terminalreporter.write_line(f"{count:5d} skipped: no {PREREQUISITES[name]}")
