"""The bot's consistency check against the contract-checked fake GitHub: what bounds it."""

from __future__ import annotations

from cpci.github.bot import check_consistency
from cpci.github.client import GitHubClient
from tests.github.fake_github import FakeGitHub
from tests.github.pairs import RULES

REPO = "octo/workers"
BASE, HEAD = "b" * 40, "c" * 40


def test_a_rules_file_over_the_bound_is_not_read_and_says_so(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.add_pull(REPO, 3, head_sha=HEAD, base_sha=BASE)
    fake.contents[(REPO, ".github/cpci.yml", BASE)] = RULES
    pull = client.get_pull(REPO, 3)
    result = check_consistency(client, REPO, pull, ".github/cpci.yml", max_file_bytes=10)
    size = len(RULES.encode())
    assert result.error == f".github/cpci.yml: {size:,} bytes, over the 10-byte bound"
    assert check_consistency(client, REPO, pull, ".github/cpci.yml").error is None
