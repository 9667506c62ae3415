"""Reading a pair's files: through GitHub's contents API (the contract-checked fake) at a PR's
base and head, and from a local checkout at the merge base and the head; both bounded."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cpci.github.client import GitHubClient
from cpci.github.pair_files import GitHubPairReader, GitPairReader
from tests.github.fake_github import CONTENT_LIMIT, FakeGitHub
from tests.github.pairs import V1, WORKER_V1

REPO = "octo/workers"
BASE, HEAD = "b" * 40, "c" * 40


def test_the_contents_api_reads_each_side_and_links_to_the_lines(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.add_pull(REPO, 9, head_sha=HEAD, base_sha=BASE)
    fake.contents[(REPO, V1, BASE)] = WORKER_V1
    fake.contents[(REPO, V1, HEAD)] = WORKER_V1 + "\n# more\n"
    reader = GitHubPairReader(client, REPO, client.get_pull(REPO, 9), max_bytes=10_000)
    assert reader.read(V1, "base").text == WORKER_V1
    assert reader.read(V1, "head").text == WORKER_V1 + "\n# more\n"
    assert ("GET", f"/repos/{REPO}/contents/{V1}") in fake.calls  # a path of several segments
    assert reader.link(V1, "head", 12, 18) == (
        f"https://github.com/{REPO}/blob/{HEAD}/{V1}#L12-L18"
    )
    gone = reader.read("workers/gone.py", "head")
    assert (gone.text, gone.problem) == (
        None,
        f"`workers/gone.py` does not exist at head ({HEAD[:12]})",
    )


def test_a_file_over_the_bound_is_not_read_and_says_its_size(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.add_pull(REPO, 9, head_sha=HEAD, base_sha=BASE)
    fake.contents[(REPO, V1, HEAD)] = "x = 1\n" * 100
    small = GitHubPairReader(client, REPO, client.get_pull(REPO, 9), max_bytes=599)
    over = small.read(V1, "head")
    assert (over.text, over.problem) == (
        None,
        f"`{V1}` is 600 bytes at head, over the 599-byte bound",
    )
    fake.contents[(REPO, V1, BASE)] = "#" * (CONTENT_LIMIT + 1)
    large = GitHubPairReader(client, REPO, client.get_pull(REPO, 9), max_bytes=2 * CONTENT_LIMIT)
    assert large.read(V1, "base").problem == (
        f"GitHub sends no content for `{V1}` ({CONTENT_LIMIT + 1:,} bytes)"
    )
    found = client.get_file(REPO, V1, BASE, max_bytes=10)
    assert found is not None
    assert (found.size, found.text) == (CONTENT_LIMIT + 1, None)


def _git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "-C", str(repo), *identity, *args], check=True, capture_output=True)


def test_a_checkout_is_read_at_the_merge_base_and_the_head(tmp_path: Path) -> None:
    """The base branch moved on after the PR branched: the PR's base is where it branched."""
    repo = tmp_path / "repo"
    (repo / "workers").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / V1).write_text("v = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    (repo / V1).write_text("v = 2\n")
    _git(repo, "commit", "-q", "-am", "the PR")
    _git(repo, "checkout", "-q", "main")
    (repo / V1).write_text("v = 3\n")
    _git(repo, "commit", "-q", "-am", "main moves on")
    reader = GitPairReader(repo, "main", "pr")
    assert reader.read(V1, "base").text == "v = 1\n"
    assert reader.read(V1, "head").text == "v = 2\n"
    bounded = GitPairReader(repo, "main", "pr", max_bytes=5)
    assert bounded.read(V1, "head").problem == f"`{V1}` is 6 bytes at head, over the 5-byte bound"
    assert reader.read("nope.py", "base").problem.startswith("`nope.py` does not exist at base")
    assert reader.link(V1, "head", 1, 2) is None
