"""`cpci action` test mode uploading to a live service: an empty shard (nothing collected) is
uploaded and counted, on its matrix leg, so the report never waits for it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.upload.support import REPO, LiveService, action_env, run_cpci

SUITE = """
def test_plain():
    pass
"""


def test_an_empty_shard_is_uploaded_on_its_leg(service: LiveService, tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    inputs = action_env(
        tmp_path,
        tests="test_suite.py",
        server_url=service.url,
        token=service.token,
        pytest_args="-k nothing_matches -p no:cacheprovider",
        shard_index="1",
        shard_total="2",
        leg='["self-hosted", "a100"]',
    )
    job = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "d" * 40,
        "GITHUB_RUN_ID": "act-1",
        "GITHUB_REF_NAME": "main",
        "RUNNER_TEMP": str(tmp_path / "temp"),
    }
    done = run_cpci(tmp_path, "action", env={**inputs, **job})
    assert "cpci: uploaded 0 result(s)" in done.stdout, done.stdout + done.stderr
    assert "commit ancestry not recorded" in done.stdout  # no git checkout here: a note only
    shards = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/act-1").json()["run"]["shards"]
    assert shards["reported"] == 1
    assert shards["missing_by_leg"] == {"a100,self-hosted": [0]}
