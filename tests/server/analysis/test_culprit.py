"""The culprit along the first-parent chain: injected breaks, some commits never run."""

from __future__ import annotations

import itertools
import random

import pytest

from cpci.evidence import EvidencePolicy
from cpci.schema import RunLink
from cpci.schema.culprit import CulpritRange
from cpci.server.analysis.culprit import find_culprit
from cpci.server.analysis.observations import Observation

POLICY = EvidencePolicy()
_ids = itertools.count(1)


def chain(n: int) -> list[str]:
    """n commits, tip first (c{n-1} is the tip, c0 the oldest)."""
    return [f"c{k:02d}" for k in reversed(range(n))]


def seen(commit: str, outcome: str, *, flaky: bool = False, pr: bool = False) -> Observation:
    run_id = next(_ids)
    return Observation(
        run=RunLink(ci_run_id=str(run_id), ci_attempt=1, commit=commit, url=""),
        run_id=run_id,
        environment_id=1,
        outcome=outcome,
        flaky=flaky,
        on_pull_request=pr,
        signature="AssertionError: broken" if outcome == "failed" else "",
    )


def culprit(commits: list[str], history: list[Observation]) -> CulpritRange:
    return find_culprit(
        repository="o/r",
        branch="main",
        config="t.py::x@2",
        chain=commits,
        history=history,
        policy=POLICY,
    )


def history(commits: list[str], ran: set[int], broken_from: int) -> list[Observation]:
    """The config ran (oldest first) on the commits whose index is in `ran`, passing before
    `broken_from` and failing (3 attempts) from it on."""
    out = []
    for k in sorted(ran):
        commit = commits[len(commits) - 1 - k]
        out += [seen(commit, "failed")] * 3 if k >= broken_from else [seen(commit, "passed")]
    return out


def test_break_with_every_commit_run_names_the_commit() -> None:
    commits = chain(20)
    found = culprit(commits, history(commits, set(range(20)), broken_from=15))
    assert found.status == "broken"
    assert (found.last_good, found.first_bad, found.untested) == ("c14", "c15", [])
    assert found.culprit == "c15"
    assert found.midpoint() is None


def test_commits_never_run_make_the_range() -> None:
    commits = chain(20)
    ran = set(range(20)) - {11, 12, 13}
    found = culprit(commits, history(commits, ran, broken_from=12))
    assert found.status == "broken"
    assert (found.last_good, found.first_bad) == ("c10", "c14")
    assert found.untested == ["c11", "c12", "c13"]
    assert found.suspects == ["c11", "c12", "c13", "c14"]
    assert found.culprit is None
    assert found.midpoint() == "c12"


@pytest.mark.parametrize("seed", range(40))
def test_injected_breaks_are_always_in_the_range(seed: int) -> None:
    """Random breaks, random commits skipped: the true culprit is always a suspect, and the
    suspects are exactly the commits from the one after the last pass to the first failure."""
    rng = random.Random(seed)
    n = rng.randrange(15, 40)
    commits = chain(n)
    start = rng.randrange(10, n - 1)
    ran = {k for k in range(n) if rng.random() < 0.6} | {start - 3, n - 1}
    found = culprit(commits, history(commits, ran, broken_from=start))
    assert found.status == "broken", found.reason
    good = max(k for k in ran if k < start)
    bad = min(k for k in ran if k >= start)
    assert found.last_good == f"c{good:02d}"
    assert found.suspects == [f"c{k:02d}" for k in range(good + 1, bad + 1)]
    assert f"c{start:02d}" in found.suspects


@pytest.mark.parametrize("seed", range(20))
def test_bisection_at_midpoints_ends_at_the_culprit(seed: int) -> None:
    """Running the config at each midpoint (as the dispatched job does) narrows the range to
    the injected culprit in at most ceil(log2(suspects)) runs."""
    rng = random.Random(seed)
    n = 30
    commits = chain(n)
    start = rng.randrange(12, 28)
    ran = set(range(10)) | {29}
    runs = history(commits, ran, broken_from=start)
    found = culprit(commits, runs)
    first = len(found.suspects)
    steps = 0
    while (mid := found.midpoint()) is not None:
        k = int(mid[1:])
        runs += [seen(mid, "failed")] * 3 if k >= start else [seen(mid, "passed")]
        found = culprit(commits, runs)
        steps += 1
    assert found.culprit == f"c{start:02d}"
    assert steps <= (first - 1).bit_length()


def test_a_flaky_config_failing_once_names_no_commit() -> None:
    commits = chain(20)
    runs = []
    for k in range(20):
        commit = commits[19 - k]
        runs.append(seen(commit, "failed" if k % 4 == 0 or k == 19 else "passed"))
    found = culprit(commits, runs)
    assert found.status == "undecided"
    assert found.culprit is None
    assert found.midpoint() is None
    assert found.chance is not None
    assert found.chance.flake_explains


def test_a_pass_after_a_rerun_is_a_good_commit() -> None:
    commits = chain(12)
    runs = history(commits, set(range(12)) - {8}, broken_from=9)
    runs += [seen("c08", "failed"), seen("c08", "passed", flaky=True)]
    found = culprit(commits, runs)
    assert (found.last_good, found.first_bad) == ("c08", "c09")


def test_pull_requests_and_commits_off_the_chain_are_not_read() -> None:
    commits = chain(12)
    runs = history(commits, set(range(12)), broken_from=11)
    runs += [seen("c10", "failed", pr=True), seen("elsewhere", "passed")]
    found = culprit(commits, runs)
    assert (found.last_good, found.first_bad) == ("c10", "c11")


def test_no_pass_on_the_chain_is_undecided_and_a_passing_tip_is_passing() -> None:
    commits = chain(5)
    failing = culprit(commits, history(commits, set(range(5)), broken_from=0))
    assert failing.status == "undecided"
    assert failing.last_good is None
    assert failing.first_bad == "c00"
    passing = culprit(commits, history(commits, {0, 3}, broken_from=99))
    assert passing.status == "passing"
    assert passing.first_bad is None
    assert culprit(commits, []).status == "no-results"


def test_commits_not_run_yet_above_the_failures_are_not_suspects() -> None:
    commits = chain(20)
    found = culprit(commits, history(commits, set(range(17)), broken_from=14))
    assert (found.last_good, found.first_bad, found.untested) == ("c13", "c14", [])
    assert found.tip == "c19"
