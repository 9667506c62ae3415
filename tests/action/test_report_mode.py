"""`cpci action` in report mode: the service's PR report becomes one comment and a check run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpci.cli import main
from cpci.schema import Outcome
from tests.builders import REPO, record
from tests.github.fake_github import FakeGitHub
from tests.upload.support import LiveService, results_file, upload_args

BASE, HEAD = "b" * 40, "c" * 40
CONFIGS = ["t.py::test_attn[p2p]", "t.py::test_attn[a2a]"]


def upload(
    live: LiveService, tmp_path: Path, commit: str, outcomes: list[Outcome], **extra: str
) -> None:
    records = [record(nodeid=n, outcome=o) for n, o in zip(CONFIGS, outcomes, strict=True)]
    path = results_file(tmp_path / f"{commit[:4]}.jsonl", records)
    args = upload_args(live, tmp_path, path, "--commit", commit, "--ci-run-id", commit[:6])
    for flag, value in extra.items():
        args += [f"--{flag.replace('_', '-')}", value]
    assert main(args) == 0


def test_report_mode_posts_one_comment_and_a_failing_check(
    service: LiveService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upload(service, tmp_path, BASE, ["passed", "passed"], branch="main")
    upload(service, tmp_path, HEAD, ["passed", "failed"], pull_request="7", base_commit=BASE)
    fake = FakeGitHub(tokens={"ghs_job": "github-actions[bot]"})
    fake.add_pull(REPO, 7, head_sha=HEAD, base_sha=BASE, files=[("modified", "t.py")])
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"pull_request": {"number": 7, "head": {"sha": HEAD}, "base": {"sha": BASE}}})
    )
    for name, value in {
        "CPCI_INPUT_MODE": "report",
        "CPCI_INPUT_SERVER_URL": service.url,
        "CPCI_INPUT_TOKEN": service.token,
        "CPCI_INPUT_GITHUB_TOKEN": "ghs_job",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "out.txt"),
    }.items():
        monkeypatch.setenv(name, value)
    with fake.serve() as api:
        monkeypatch.setenv("GITHUB_API_URL", api)
        assert main(["action"]) == 1  # fail-on new-failures: the PR broke a2a
        assert main(["action"]) == 1  # again: the same comment, not a second one
    comments = fake.comments[(REPO, 7)]
    assert len(comments) == 1
    assert comments[0]["user"]["login"] == "github-actions[bot]"
    assert "t.py::test_attn[a2a]" in comments[0]["body"]
    assert f"{service.url}/ui/acme/attn/pulls/7" in comments[0]["body"]
    conclusions = {c["conclusion"] for c in fake.check_runs.values()}
    assert conclusions == {"failure"}
    assert (
        "report-url<<CPCI_EOF\n" + f"{service.url}/ui/acme/attn/pulls/7"
        in (tmp_path / "out.txt").read_text()
    )
