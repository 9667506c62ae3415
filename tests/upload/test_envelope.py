"""The run envelope: fields from flags over the CI's variables, errors that name both, a PR run's
commits and base branch from GitHub's real pull_request payload, and the matrix leg (a name, or
runner labels stored sorted) with the legs the matrix declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from cpci.cli import main
from cpci.upload.envelope import RunFields, build_envelope, leg_name
from cpci.upload.errors import EnvelopeError
from tests.builders import REPO
from tests.github.contract import require_reference
from tests.upload.support import LiveService, results_file, upload_args

MERGE = "9" * 40  # GITHUB_SHA of a pull_request event: the merge commit GitHub made


def test_envelope_errors_name_the_flag_and_variable() -> None:
    with pytest.raises(EnvelopeError, match=r"^missing --commit \(or GITHUB_SHA\)$"):
        build_envelope(RunFields(repository=REPO, ci_run_id="1"), [], {})
    every = r"--repository \(or GITHUB_REPOSITORY\), --commit .*, --ci-run-id \(or GITHUB_RUN_ID\)"
    with pytest.raises(EnvelopeError, match=f"^missing {every}$"):
        build_envelope(RunFields(), [], {})
    with pytest.raises(EnvelopeError, match="INDEX/TOTAL"):
        build_envelope(
            RunFields(repository=REPO, commit="a" * 40, ci_run_id="1", shard="2/2"), [], {}
        )


def pull_request_job(**more: str) -> dict[str, str]:
    """A pull_request job's variables around GitHub's real `opened` payload (PR 2 of
    Codertocat/Hello-World, head `ec26c3e5`, base `f95f852b` on `master`)."""
    payload = require_reference() / "webhooks" / "pull_request.opened.payload.json"
    return {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(payload),
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_SHA": MERGE,
        "GITHUB_RUN_ID": "7",
        "GITHUB_BASE_REF": "master",
        **more,
    }


def test_a_pr_run_names_its_head_its_base_and_the_merge_commit_the_job_tested() -> None:
    built = build_envelope(RunFields(), [], pull_request_job())
    assert built.pull_request == 2
    assert built.commit == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # the head: the report's
    assert built.base_commit == "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
    assert built.base_branch == "master"
    assert built.merge_commit == MERGE  # a pull_request OIDC token's `sha`
    flags = RunFields(base_branch="release/2", merge_commit="8" * 40)
    assert build_envelope(flags, [], pull_request_job()).base_branch == "release/2"
    assert build_envelope(flags, [], pull_request_job()).merge_commit == "8" * 40
    without_variable = {k: v for k, v in pull_request_job().items() if k != "GITHUB_BASE_REF"}
    assert build_envelope(RunFields(), [], without_variable).base_branch == "master"  # payload


def test_a_branch_run_has_no_base_branch_or_merge_commit() -> None:
    push = {"GITHUB_REPOSITORY": REPO, "GITHUB_SHA": "d" * 40, "GITHUB_RUN_ID": "8"}
    built = build_envelope(RunFields(), [], {**push, "GITHUB_EVENT_NAME": "push"})
    assert (built.base_branch, built.merge_commit) == (None, None)
    with pytest.raises(EnvelopeError, match="give --pull-request too"):
        build_envelope(RunFields(base_branch="main"), [], push)


def upload_empty_shard(service: LiveService, tmp_path: Path, run: str, *extra: str) -> None:
    """`cpci upload` of an empty shard of `run` on main (the leg from flags or variables)."""
    results = results_file(tmp_path / "r.jsonl", [])
    branch = ("--commit", "e" * 40, "--branch", "main", "--ci-run-id", run)
    assert main(upload_args(service, tmp_path, results, *branch, *extra)) == 0


def shards_of(service: LiveService, run: str) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/{run}")
    shards: dict[str, Any] = response.json()["run"]["shards"]
    return shards


def test_a_leg_given_as_runner_labels_is_sorted(
    service: LiveService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CPCI_LEG", '["self-hosted", "h100", "linux"]')
    upload_empty_shard(service, tmp_path, "leg-1")
    upload_empty_shard(service, tmp_path, "leg-1", "--leg", "a100")  # the flag beats CPCI_LEG
    shards = shards_of(service, "leg-1")
    assert shards["legs"] == ["a100", "h100,linux,self-hosted"]
    assert shards["text"] == "2/2 shards on 2 legs"


def test_a_malformed_label_list_names_the_flag() -> None:
    with pytest.raises(EnvelopeError, match="--leg"):
        leg_name('["h100", 3]')


def test_declared_legs_come_from_the_workflows_runner_label_sets(
    service: LiveService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CPCI_LEGS", '[["self-hosted", "h100"], ["self-hosted", "a100"]]')
    monkeypatch.setenv("CPCI_LEG", '["self-hosted", "h100"]')
    upload_empty_shard(service, tmp_path, "legs-1")
    shards = shards_of(service, "legs-1")
    assert shards["missing_by_leg"] == {"a100,self-hosted": [0]}
    assert shards["text"] == "1/2 shards on 2 legs"
