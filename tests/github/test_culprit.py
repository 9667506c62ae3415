"""The bisection's dispatch against the fake GitHub (held to the published contract): each step
runs the config at the range's midpoint, and the steps end at the culprit."""

from __future__ import annotations

import pytest

from cpci.github.client import GitHubClient
from cpci.github.culprit import COMMIT_INPUT, CONFIG_INPUT, next_bisection_run
from cpci.schema.culprit import CulpritRange
from tests.github.fake_github import FakeGitHub

REPO = "acme/attn"
CONFIG = "tests/test_cp.py::test_attn[p2p]@2"
COMMITS = [f"{k:040x}" for k in range(40)]


def known(last_good: int, first_bad: int) -> CulpritRange:
    """The range the service names once the config passed at `last_good` and failed at
    `first_bad`, nothing run between (what each uploaded bisection run leaves)."""
    return CulpritRange(
        repository=REPO,
        branch="main",
        config=CONFIG,
        status="broken",
        reason="",
        tip=COMMITS[-1],
        last_good=COMMITS[last_good],
        first_bad=COMMITS[first_bad],
        untested=COMMITS[last_good + 1 : first_bad],
    )


@pytest.mark.parametrize("culprit", [11, 12, 20, 31, 38, 39])
def test_dispatches_at_midpoints_end_at_the_culprit(
    fake: FakeGitHub, client: GitHubClient, culprit: int
) -> None:
    good, bad = 10, 39
    found = known(good, bad)
    while True:
        step = next_bisection_run(found, client, workflow="cpci-shards.yml", ref="main")
        if not step.dispatched:
            break
        assert step.commit is not None
        repo, workflow, body = fake.dispatches[-1]
        assert (repo, workflow, body["ref"]) == (REPO, "cpci-shards.yml", "main")
        assert body["inputs"] == {CONFIG_INPUT: CONFIG, COMMIT_INPUT: step.commit}
        k = COMMITS.index(step.commit)
        good, bad = (good, k) if k >= culprit else (k, bad)  # the run's upload narrows it
        found = known(good, bad)
    assert step.commit == COMMITS[culprit]
    assert len(fake.dispatches) <= 5  # ceil(log2(29 suspects))


def test_nothing_is_dispatched_without_a_named_break(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    undecided = known(10, 20).model_copy(update={"status": "undecided", "reason": "a flake?"})
    step = next_bisection_run(undecided, client, workflow="cpci-shards.yml", ref="main")
    assert not step.dispatched
    assert "a flake?" in step.message
    assert fake.dispatches == []
