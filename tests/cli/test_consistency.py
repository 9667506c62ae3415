"""`cpci consistency` on a local diff: the same function-level result the service gives, read
with git at the merge base and the head, and patches the author applies with `git apply`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cpci.cli import main
from tests.github.pairs import EMPTY_BATCH, RULES, V1, V2, WORKER_V1, WORKER_V2, edit


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    done = subprocess.run(
        ["git", "-C", str(repo), *identity, *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The pair on `main`, and a branch `fix` that fixes `train` in v2 only."""
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / "workers").mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".github" / "cpci.yml").write_text(RULES)
    (repo / V1).write_text(WORKER_V1)
    (repo / V2).write_text(WORKER_V2)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "the workers")
    _git(repo, "checkout", "-q", "-b", "fix")
    (repo / V2).write_text(edit(WORKER_V2, *EMPTY_BATCH))
    _git(repo, "commit", "-q", "-am", "fix: empty batches in v2")
    return repo


def consistency(repo: Path, *extra: str) -> int:
    return main(["consistency", "--base", "main", "--head", "fix", "--repo", str(repo), *extra])


def test_a_local_diff_names_the_function_and_writes_a_patch_git_applies(
    checkout: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    patches = tmp_path / "patches"
    assert consistency(checkout, "--patch-dir", str(patches)) == 0  # a warning does not fail
    out = capsys.readouterr().out
    assert f"warn: rule workers: changed {V2}; 1 function(s) to port." in out
    assert (
        f"warn: rule workers: DTensorPolicyWorkerV2.train ({V2}:13-19) changed; its twin "
        f"DTensorPolicyWorker.train ({V1}:12-18) did not (100% alike before). To acknowledge "
        "only this one: cpci-ack: workers:DTensorPolicyWorkerV2.train"
    ) in out
    assert "+        return sum(losses) / max(len(losses), 1)\n" in out
    [patch] = patches.iterdir()
    assert patch.name == "workers--DTensorPolicyWorkerV2.train.patch"
    assert f"wrote {patch}" in out
    _git(checkout, "apply", str(patch))  # the author ports the fix on the PR's branch
    assert (checkout / V1).read_text() == edit(WORKER_V1, *EMPTY_BATCH)


def test_a_fix_title_fails_and_an_ack_of_the_function_waives_it(
    checkout: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    title = ["--title", "fix: empty batches"]
    assert consistency(checkout, *title) == 1
    assert "raised to fail: this PR is a fix (its title starts with `fix:`)" in (
        capsys.readouterr().out
    )
    body = tmp_path / "body.md"
    body.write_text("cpci-ack: workers:train\n")
    assert consistency(checkout, *title, "--body-file", str(body)) == 1  # the author's: no
    assert consistency(checkout, *title, "--ack", "workers:train") == 0  # the workflow's: yes
    assert consistency(checkout, "--label", "bug", "--rules-file", str(tmp_path / "r.yml")) == 2
    (tmp_path / "r.yml").write_text("fixes: {labels: [bug]}\n" + RULES)
    assert consistency(checkout, "--label", "bug", "--rules-file", str(tmp_path / "r.yml")) == 1


def test_json_carries_the_drifts_and_a_file_over_the_bound_is_checked_by_file(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert consistency(checkout, "--json") == 0
    [finding] = json.loads(capsys.readouterr().out)["findings"]
    assert finding["granularity"] == "function"
    [drift] = finding["drifts"]
    assert (drift["function"]["qualname"], drift["twin"]["qualname"]) == (
        "DTensorPolicyWorkerV2.train",
        "DTensorPolicyWorker.train",
    )
    assert drift["patch"].startswith(f"diff --git a/{V1} b/{V1}\n")
    assert consistency(checkout, "--max-file-bytes", "100") == 0
    assert (
        f"warn: rule workers: changed {V2} but not {V1} (checked file by file: `{V1}` is "
        f"{len(WORKER_V1.encode()):,} bytes at head, over the 100-byte bound)."
    ) in capsys.readouterr().out
