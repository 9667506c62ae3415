"""`cpci action` test mode uploading to a live service: an empty shard (nothing collected) is
uploaded and counted, on its matrix leg, so the report never waits for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.upload.support import REPO, LiveService

SUITE = """
def test_plain():
    pass
"""


def test_an_empty_shard_is_uploaded_on_its_leg(service: LiveService, tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPCI_", "GITHUB_"))}
    inputs = {
        "TESTS": "test_suite.py",
        "SERVER_URL": service.url,
        "TOKEN": service.token,
        "PYTEST_ARGS": "-k nothing_matches -p no:cacheprovider",
        "SHARD_INDEX": "1",
        "SHARD_TOTAL": "2",
        "LEG": '["self-hosted", "a100"]',
    }
    env |= {f"CPCI_INPUT_{k}": v for k, v in inputs.items()}
    env |= {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "d" * 40,
        "GITHUB_RUN_ID": "act-1",
        "GITHUB_REF_NAME": "main",
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "outputs.txt"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "cpci", "action"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "cpci: uploaded 0 result(s)" in done.stdout, done.stdout + done.stderr
    assert "commit ancestry not recorded" in done.stdout  # no git checkout here: a note only
    shards = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/act-1").json()["run"]["shards"]
    assert shards["reported"] == 1
    assert shards["missing_by_leg"] == {"a100,self-hosted": [0]}
