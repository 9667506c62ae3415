"""The fork-results workflow's pull request, told from a real `workflow_run` payload (made a
fork's pull_request run) against the contract-checked fake GitHub: two PRs sharing a head commit
are never confused, a number a shard wrote is only a candidate, and what cannot be told is
refused; `cpci fork-pull` end to end over loopback HTTP writes the step's outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cpci.github.client import GitHubClient
from cpci.github.fork_pull import ForkPullError, RunHead, resolve_fork_pull
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub

BASE_REPO = "octo-org/octo-repo"  # the payload's repository
FORK = "fork-owner/octo-repo"
SHA = "3484a3fb816e0859fd6e1cea078d76385ff50625"  # the payload's head_sha
BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"


def fork_run_event() -> dict[str, Any]:
    """GitHub's workflow_run.completed example, as a fork PR's `pull_request` run has it: the
    head in the fork, on branch `feature`, and no pull_requests listed."""
    payload: dict[str, Any] = json.loads(
        (require_reference() / "webhooks" / "workflow_run.completed.payload.json").read_text()
    )
    run = payload["workflow_run"]
    run.update(event="pull_request", head_branch="feature", pull_requests=[])
    run["head_repository"] = {**run["head_repository"], "full_name": FORK, "fork": True}
    return payload


def two_prs_of_one_head(fake: FakeGitHub) -> None:
    """The fork's `feature` branch opened against main (#5) and release (#6), one head commit;
    another fork's branch at the same commit (#7)."""
    for number, base_ref in ((5, "main"), (6, "release")):
        fake.add_pull(
            BASE_REPO,
            number,
            head_sha=SHA,
            base_sha=BASE,
            head_repo=FORK,
            head_ref="feature",
            base_ref=base_ref,
        )
    fake.add_pull(
        BASE_REPO, 7, head_sha=SHA, base_sha=BASE, head_repo="other/octo-repo", head_ref="feature"
    )


def test_the_pr_the_shards_name_is_taken_only_when_its_head_is_the_runs(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    two_prs_of_one_head(fake)
    head = RunHead.from_event(fork_run_event())
    assert (head.repository, head.branch, head.sha, head.listed) == (FORK, "feature", SHA, ())
    pull = resolve_fork_pull(client, BASE_REPO, head, claimed=[6])
    assert (pull.number, pull.base_ref) == (6, "release")  # never #5, which shares the commit
    with pytest.raises(ForkPullError, match="#7 has its head in other/octo-repo"):
        resolve_fork_pull(client, BASE_REPO, head, claimed=[7])  # a hostile shard's number
    with pytest.raises(ForkPullError, match="the shards disagree on which one ran"):
        resolve_fork_pull(client, BASE_REPO, head, claimed=[5, 6])
    with pytest.raises(ForkPullError, match="GitHub lists none for a fork's run and no shard"):
        resolve_fork_pull(client, BASE_REPO, head)
    with pytest.raises(ForkPullError, match="#9 does not exist"):
        resolve_fork_pull(client, BASE_REPO, head, claimed=[9])


def test_a_pr_that_moved_on_or_another_branch_is_refused(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.add_pull(
        BASE_REPO, 5, head_sha="c" * 40, base_sha=BASE, head_repo=FORK, head_ref="feature"
    )
    fake.add_pull(BASE_REPO, 6, head_sha=SHA, base_sha=BASE, head_repo=FORK, head_ref="other")
    head = RunHead.from_event(fork_run_event())
    with pytest.raises(ForkPullError, match="#5 has moved on to cccccccccccc since this run"):
        resolve_fork_pull(client, BASE_REPO, head, claimed=[5])
    with pytest.raises(ForkPullError, match="#6 has the head branch other"):
        resolve_fork_pull(client, BASE_REPO, head, claimed=[6])


def test_the_events_own_pull_requests_are_candidates_too(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    two_prs_of_one_head(fake)
    event = fork_run_event()
    event["workflow_run"]["pull_requests"] = [{"number": 5}]
    assert resolve_fork_pull(client, BASE_REPO, RunHead.from_event(event)).number == 5
    with pytest.raises(ForkPullError, match="not a workflow_run event"):
        RunHead.from_event({"pull_request": {}})


def test_the_command_writes_the_steps_outputs(fake: FakeGitHub, tmp_path: Path) -> None:
    """Artifacts as a hostile fork may fill them: one real number, garbage, a huge file."""
    two_prs_of_one_head(fake)
    event = tmp_path / "event.json"
    event.write_text(json.dumps(fork_run_event()))
    for name, text in (("a", "6\n"), ("b", "$(touch pwned)"), ("c", "6" * 100_000)):
        (tmp_path / "results" / f"cpci-results-{name}").mkdir(parents=True)
        (tmp_path / "results" / f"cpci-results-{name}" / "cpci-results.jsonl.pull").write_text(text)
    output = tmp_path / "output"
    with fake.serve() as url:
        done = subprocess.run(
            [sys.executable, "-m", "cpci", "fork-pull", "--claims", str(tmp_path / "results")],
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
                "GITHUB_REPOSITORY": BASE_REPO,
                "GITHUB_EVENT_PATH": str(event),
                "GITHUB_TOKEN": "ghs_test",
                "GITHUB_API_URL": url,
                "GITHUB_OUTPUT": str(output),
            },
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the run of fork-owner/octo-repo:feature is #6 into release" in done.stdout
    written = output.read_text()
    assert "number<<CPCI_EOF\n6\nCPCI_EOF" in written
    assert f"base<<CPCI_EOF\n{BASE}\nCPCI_EOF" in written
    assert "base-ref<<CPCI_EOF\nrelease\nCPCI_EOF" in written
    assert not (tmp_path / "pwned").exists()
