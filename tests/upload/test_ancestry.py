"""What a branch upload sends besides the results: the checkout's first-parent ancestry, read from
a real git repository; without one, a note, and the upload (an empty shard here) stands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from cpci.cli import main
from cpci.upload.ancestry import first_parent_links
from tests.builders import REPO
from tests.upload.support import LiveService, upload_args

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """main: c1 - c2 - merge(c2, side) - c4; the side branch's commit is no first parent."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("c1", "c2"):
        git(repo, "commit", "-q", "--allow-empty", "-m", name)
    git(repo, "checkout", "-q", "-b", "side")
    git(repo, "commit", "-q", "--allow-empty", "-m", "side")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "side")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c4")
    return repo


def parents_stored(service: LiveService) -> dict[str, str]:
    engine = create_engine(service.database_url)
    with engine.connect() as conn:
        rows = conn.execute(text('SELECT "commit", parent FROM commit_parent')).all()
    engine.dispose()
    return {c: p for c, p in rows}


def test_a_branch_upload_records_the_first_parent_history_of_the_checkout(
    service: LiveService,
    checkout: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    chain = git(checkout, "log", "--first-parent", "--format=%H").split()
    side = git(checkout, "rev-parse", "side")
    monkeypatch.chdir(checkout)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code = main(
        upload_args(
            service, tmp_path, empty, "--commit", head, "--branch", "main", "--ci-run-id", "anc-1"
        )
    )
    assert code == 0
    assert "recorded 3 first-parent commit link(s)" in capsys.readouterr().err
    stored = parents_stored(service)
    assert [stored[c] for c in chain[:3]] == chain[1:4]
    assert side not in stored.values()  # the merged branch is not on the first-parent line


def test_without_a_repository_ancestry_is_skipped_and_the_upload_stands(
    service: LiveService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "never-written.jsonl"
    code = main(
        upload_args(
            service,
            tmp_path,
            missing,
            "--commit",
            "e" * 40,
            "--branch",
            "main",
            "--ci-run-id",
            "anc-2",
            "--shard",
            "1/2",
        )
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert "empty shard" in err
    assert "commit ancestry not recorded" in err
    summary = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/anc-2").json()
    assert summary["run"]["shards"]["reported"] == 1  # the empty shard is counted
    assert summary["run"]["shards"]["missing"] == [0]


def test_git_log_of_an_unknown_commit_is_a_note(checkout: Path) -> None:
    found = first_parent_links("f" * 40, cwd=checkout)
    assert found.links == ()
    assert "commit ancestry not recorded" in found.note
