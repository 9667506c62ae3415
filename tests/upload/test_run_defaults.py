"""What an upload outside CI defaults to: the shard's times from its files, the commit and
branch from a real git checkout (or why there are none), and a run id GitHub never gives."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from cpci.upload import run_defaults
from cpci.upload.envelope import RunFields, missing
from cpci.upload.run_defaults import local_defaults, shard_times
from tests.upload.support import git, git_checkout

NOW = datetime(2025, 6, 15, 12, 0, tzinfo=timezone.utc)


def test_the_shard_ran_from_its_plan_to_its_last_result(tmp_path: Path) -> None:
    results, plan = tmp_path / "r.jsonl", tmp_path / "r.jsonl.plan.json"
    assert shard_times([str(results)]) == (None, None)  # nothing written: no times
    results.write_text("")
    plan.write_text("{}")
    os.utime(plan, (1_750_000_000, 1_750_000_000))
    os.utime(results, (1_750_000_090, 1_750_000_090))
    started, ended = shard_times([str(results)])
    assert (started, ended) == (
        datetime.fromtimestamp(1_750_000_000, timezone.utc),
        datetime.fromtimestamp(1_750_000_090, timezone.utc),
    )
    os.utime(plan, (1_750_000_100, 1_750_000_100))  # planned again after: not this shard's start
    assert shard_times([str(results)]) == (None, ended)


def test_no_commit_says_why_and_the_run_id_is_one_github_never_gives(tmp_path: Path) -> None:
    outside = local_defaults(RunFields(repository="acme/attn"), [], cwd=tmp_path, now=NOW)
    assert outside.fields.commit is None
    assert outside.fields.ci_run_id == "local-20250615T120000Z"  # no shard end: now
    assert missing(outside.fields, outside.why) == [
        f"--commit (or GITHUB_SHA; {tmp_path} is not in a git checkout)"
    ]
    git(tmp_path, "init", "-q")
    assert run_defaults.git_checkout(tmp_path).why == (
        f"the git checkout at {tmp_path} has no commit yet"
    )


def test_a_detached_head_gives_its_commit_and_no_branch(tmp_path: Path) -> None:
    head = git_checkout(tmp_path)
    git(tmp_path, "checkout", "-q", "--detach")
    done = local_defaults(RunFields(), [], cwd=tmp_path, now=NOW)
    assert (done.fields.commit, done.fields.branch) == (head, None)
    assert done.notes[0] == f"commit {head[:12]} from git in {tmp_path}"
