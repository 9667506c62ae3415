"""The verdicts that used to go wrong, end to end: real worlds through the runner, `cpci upload`
to a real service on 127.0.0.1, and the PR report read back over HTTP.

One suite runs twice: at the base commit everything passes; at the PR head one config fails only
after its predecessor (order-dependent), one world never starts (its config is not run), and one
config segfaults on rank 1 while the surviving rank 0 logs NCCL's "remote process exited". The
report must call them NEW FAILURE (order-dependent), INFRA (not run) and NEW FAILURE (the
segfault is the PR's doing, whatever the survivor logged).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.live_server import serve
from tests.prerequisites import import_or_skip
from tests.runner.helpers import RANK1_SEGFAULTS
from tests.server.databases import migrate_with_token

import_or_skip("torch", "torch", "the verdicts are read from real runner worlds")

REPO = "cp-team/attention"
BASE, HEAD = "a" * 40, "b" * 40
PR = 7

CONFTEST = """
import os

# The PR breaks start-up of 3-rank worlds: rank 1 exits before the world runs anything.
if os.environ.get("BROKEN") == "1" and os.environ.get("WORLD_SIZE") == "3":
    if os.environ.get("RANK") == "1":
        raise SystemExit("rank 1 cannot start: no such device")
"""

SUITE = (
    """
import os
import pytest
import torch.distributed as dist

BROKEN = os.environ.get("BROKEN") == "1"
STATE = {"poisoned": False}


@pytest.mark.cpci(world_size=2)
def test_a_leaves_state_behind(cpci_dist):
    STATE["poisoned"] = BROKEN  # the PR's bug: module state no reset can see


@pytest.mark.cpci(world_size=2)
def test_b_after_a(cpci_dist):
    assert not STATE["poisoned"], "stale state from an earlier test"


@pytest.mark.cpci(world_size=2)
def test_c_segfaults(cpci_dist):
    if BROKEN:
        rank1_segfaults_then_rank0_echoes(cpci_dist)


@pytest.mark.cpci(world_size=3)
def test_d_three_ranks(cpci_dist):
    t = dist.get_world_size()
    assert t == 3
"""
    + RANK1_SEGFAULTS
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real service on SQLite; its base URL and a branch-scoped upload token."""
    url = f"sqlite:///{tmp_path}/cpci.db"
    engine = create_db_engine(url)
    token = migrate_with_token(engine, REPO, scope="branch")
    with serve(create_app(Settings(database_url=url), engine=engine)) as base:
        yield base, token
    engine.dispose()


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without CI variables the uploader would read."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CPCI_", "RUNNER_"))}
    return {**env, **extra}


def _run_suite(suite: Path, results: Path, broken: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--cpci-results={results}",
            "--cpci-isolate-failures",
            "--cpci-timeout=120",
        ],
        cwd=suite,
        env=_clean_env(BROKEN="1" if broken else "0"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _upload(base: str, token: str, results: Path, spool: Path, *args: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cpci",
            "upload",
            "--results",
            str(results),
            "--server",
            base,
            "--repository",
            REPO,
            "--spool",
            str(spool),
            *args,
        ],
        env=_clean_env(CPCI_TOKEN=token),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_order_dependent_never_started_and_segfault_beside_nccl(
    tmp_path: Path, service: tuple[str, str]
) -> None:
    base_url, token = service
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_e2e.py").write_text(SUITE)

    at_base = _run_suite(suite, tmp_path / "base.jsonl", broken=False)
    assert at_base.returncode == 0, at_base.stdout + at_base.stderr
    _upload(
        base_url,
        token,
        tmp_path / "base.jsonl",
        tmp_path / "spool",
        "--commit",
        BASE,
        "--branch",
        "main",
        "--ci-run-id",
        "100",
    )

    at_head = _run_suite(suite, tmp_path / "head.jsonl", broken=True)
    assert at_head.returncode == 1, at_head.stdout + at_head.stderr
    _upload(
        base_url,
        token,
        tmp_path / "head.jsonl",
        tmp_path / "spool",
        "--commit",
        HEAD,
        "--branch",
        "feature",
        "--pull-request",
        str(PR),
        "--base-commit",
        BASE,
        "--ci-run-id",
        "101",
    )

    report: dict[str, Any] = httpx.get(
        f"{base_url}/api/v1/repos/{REPO}/pulls/{PR}/report", timeout=30
    ).json()
    verdicts = {
        v["config"]: v
        for section in ("new_failures", "broken_at_base", "flaky", "infra", "no_baseline")
        for v in report[section]
    }
    order_dependent = verdicts["test_e2e.py::test_b_after_a@2"]
    assert order_dependent["verdict"] == "new_failure", order_dependent
    assert "order-dependent" in order_dependent["reason"]
    assert "test_a_leaves_state_behind" in order_dependent["reason"]

    never_started = verdicts["test_e2e.py::test_d_three_ranks@3"]
    assert never_started["verdict"] == "infra", never_started
    assert never_started["reason"].startswith("not run"), never_started

    segfault = verdicts["test_e2e.py::test_c_segfaults@2"]
    assert segfault["verdict"] == "new_failure", segfault
    assert segfault["head_outcome"] == "crashed"
    assert "test_e2e.py::test_a_leaves_state_behind@2" not in verdicts  # it passes at head
    assert report["status"] == "complete"
