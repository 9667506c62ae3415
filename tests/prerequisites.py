"""What some tests need beyond the project's own packages, and what happens without it.

On a user's clone, or in the project's own GitHub workflow, a test whose prerequisite is missing
skips, saying why (`[needs NAME] ...`), and the run ends with the count of tests skipped for
want of each (`tests/conftest.py`). Where the prerequisites are promised, a missing one fails
instead: `.ci/run` installs them all and sets `CPCI_TEST_REQUIRE=all` (or a comma-separated list
of the names below; `-NAME` takes one back, as `make test-pythons` does for torch), since a
suite that quietly skipped GitHub's contract or the runner's worlds would pass green while
proving nothing of them.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_ENV = "CPCI_TEST_REQUIRE"
#: Each prerequisite, and where it comes from.
PREREQUISITES = {
    "reference": "../shared/reference (GitHub's REST contract, real webhook payloads, JUnit files)",
    "torch": "torch (pip install torch==2.13.0)",
    "expecttest": "expecttest (torch.testing._internal imports it)",
    "postgres": "PostgreSQL's initdb and pg_ctl, or CPCI_TEST_POSTGRES_URL",
    "chromium": "Chromium at /usr/bin/chromium and playwright (the web UI's browser tests)",
    "podman": "podman, buildah, runc and debootstrap, as root (the service image)",
    "actionlint": "check-jsonschema and actionlint (make lint installs them)",
}
SKIP_PREFIX = "[needs "


def required() -> frozenset[str]:
    """The prerequisites this run promises (`CPCI_TEST_REQUIRE`: `all` or names, less `-NAME`s)."""
    names = {n.strip() for n in os.environ.get(REQUIRE_ENV, "").split(",") if n.strip()}
    taken_back = {n.removeprefix("-") for n in names if n.startswith("-")}
    promised = {n for n in names if not n.startswith("-")}
    unknown = (promised - {"all"} | taken_back) - PREREQUISITES.keys()
    if unknown:
        raise pytest.UsageError(
            f"{REQUIRE_ENV} names {', '.join(sorted(unknown))}: it takes `all` or some of "
            f"{', '.join(PREREQUISITES)}, each of them less as -NAME"
        )
    if "all" in promised:
        promised = set(PREREQUISITES)
    return frozenset(promised - taken_back)


def missing(name: str, reason: str) -> NoReturn:
    """The test (or the module calling this at import) cannot run without prerequisite `name`:
    skip, or fail where it was promised."""
    if name not in PREREQUISITES:
        raise ValueError(f"unknown prerequisite {name!r}: add it to PREREQUISITES")
    if name in required():
        pytest.fail(
            f"{reason}; {REQUIRE_ENV} promises {name} ({PREREQUISITES[name]})", pytrace=False
        )
    pytest.skip(f"{SKIP_PREFIX}{name}] {reason}", allow_module_level=True)


def import_or_skip(module: str, name: str, reason: str) -> ModuleType:
    """`module`, imported; else `missing(name, reason)`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing(name, f"{reason} ({exc})")


def skipped_for_want(reasons: list[str]) -> dict[str, int]:
    """How many of these skip reasons were for want of each prerequisite."""
    counts: dict[str, int] = {}
    for reason in reasons:
        start = reason.find(SKIP_PREFIX)
        if start >= 0:
            name = reason[start + len(SKIP_PREFIX) :].split("]", 1)[0]
            counts[name] = counts.get(name, 0) + 1
    return counts
