"""`cpci action` test mode uploading to a live service: an empty shard (nothing collected) is
uploaded and counted, on its matrix leg, so the report never waits for it; a refused upload
fails the step, whatever `fail-on` says, and is kept beside the results."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from cpci.cli import main
from cpci.upload.unsent import read_unsent
from tests.action.conftest import OidcJob
from tests.builders import REPO, envelope
from tests.server.oidc_keys import AUDIENCE
from tests.upload.support import (
    Completed,
    LiveService,
    action_env,
    results_file,
    run_cpci,
    upload_args,
)

SUITE = """
def test_plain():
    pass
"""


def shard_job(service: LiveService, tmp_path: Path, run: str, **inputs: str) -> Completed:
    """The Action's test mode on a push to main, CI run `run`."""
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = action_env(
        tmp_path,
        tests="test_suite.py",
        server_url=service.url,
        token=service.token,
        **inputs,
    )
    job = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "d" * 40,
        "GITHUB_RUN_ID": run,
        "GITHUB_REF_NAME": "main",
        "RUNNER_TEMP": str(tmp_path / "temp"),
    }
    return run_cpci(tmp_path, "action", env={**env, **job})


def test_an_empty_shard_is_uploaded_on_its_leg(service: LiveService, tmp_path: Path) -> None:
    done = shard_job(
        service,
        tmp_path,
        "act-1",
        pytest_args="-k nothing_matches -p no:cacheprovider",
        shard_index="1",
        shard_total="2",
        leg='["self-hosted", "a100"]',
    )
    assert "cpci: uploaded 0 result(s)" in done.stdout, done.stdout + done.stderr
    assert "commit ancestry not recorded" in done.stdout  # no git checkout here: a note only
    shards = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/act-1").json()["run"]["shards"]
    assert shards["reported"] == 1
    assert shards["missing_by_leg"] == {"a100,self-hosted": [0]}
    detail = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/act-1/detail").json()
    [ran] = [s for s in detail["shards"] if s["state"] == "reported"]
    assert ran["wall_s"] is not None  # when pytest ran, from the Action itself
    assert ran["wall_s"] >= 0


def test_a_refused_upload_fails_the_step_and_is_kept_beside_the_results(
    service: LiveService, tmp_path: Path
) -> None:
    """Another upload holds shard 0 of the run with other run fields: the service answers 409."""
    other = results_file(tmp_path / "other.jsonl", envelope(ci_run_id="act-409").results)
    assert (
        main(upload_args(service, tmp_path, other, "--ci-run-id", "act-409", "--commit", "d" * 40))
        == 0
    )
    done = shard_job(
        service, tmp_path, "act-409", fail_on="never", pytest_args="-p no:cacheprovider"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [error] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert error.startswith("::error title=cpci upload::the service refused run act-409")
    kept = tmp_path / "cpci-results.jsonl.unsent.json"
    assert f"kept in {kept}" in error
    assert read_unsent(kept).status == 409


def test_a_pr_job_uploads_its_head_and_the_merge_commit_its_oidc_token_names(
    tmp_path: Path, oidc_job: OidcJob
) -> None:
    """On a pull_request event GITHUB_SHA is GitHub's merge commit: it is the token's `sha` and
    goes as merge_commit; the PR's head goes as commit (the report's head), with the base branch
    (GITHUB_BASE_REF); the service checks the token against both."""
    head, base, merge = "a1" * 20, "b2" * 20, "c3" * 20
    event = tmp_path / "event.json"
    pull: dict[str, object] = {"number": 7, "head": {"sha": head, "ref": "feature"}}
    pull["base"] = {"sha": base, "ref": "main"}
    event.write_text(json.dumps({"number": 7, "pull_request": pull}))
    oidc_job.env.update(
        GITHUB_EVENT_NAME="pull_request",
        GITHUB_EVENT_PATH=str(event),
        GITHUB_SHA=merge,
        GITHUB_BASE_REF="main",
        GITHUB_REF_NAME="7/merge",
        GITHUB_RUN_ID="act-pr",
    )
    oidc_job.claims.update(
        sub=f"repo:{REPO}:pull_request",
        event_name="pull_request",
        ref="refs/pull/7/merge",
        job_workflow_ref=f"{REPO}/.github/workflows/ci.yml@refs/pull/7/merge",
        sha=merge,
        run_id="act-pr",
    )
    (tmp_path / "test_suite.py").write_text(SUITE)
    inputs = action_env(
        tmp_path,
        tests="test_suite.py",
        server_url=oidc_job.service,
        auth="oidc",
        oidc_audience=AUDIENCE,
        pytest_args="-p no:cacheprovider",
    )
    done = run_cpci(tmp_path, "action", env={**inputs, **oidc_job.env})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cpci: uploaded" in done.stdout
    report = httpx.get(f"{oidc_job.service}/api/v1/repos/{REPO}/pulls/7/report").json()
    assert report["head_commit"] == head
    assert report["baseline"]["requested_commit"] == base
