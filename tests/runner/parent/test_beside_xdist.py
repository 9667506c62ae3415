"""Under pytest-xdist the plain tests spread over the workers and cpci's configs are refused,
each with the way out, before any world starts (every worker would run them all again)."""

from __future__ import annotations

import json

import pytest

from tests.runner.helpers import by_nodeid, results

SUITE = """
import json

import pytest

def test_plain_one():
    pass

def test_plain_two():
    pass

@pytest.mark.cpci(world_size=2)
def test_config(cpci_dist):
    raise AssertionError("never runs under xdist")
"""


def test_configs_are_refused_in_xdist_workers_and_plain_tests_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_mixed=SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "--cpci-results=r.jsonl")
    result.assert_outcomes(passed=2, errors=1)
    out = result.stdout.str()
    assert "cpci configs do not run under pytest-xdist" in out
    assert "-p no:xdist" in out
    assert "world(s) started" not in out  # refused in the plan, before any world
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    # Both workers' plain tests in the one results file.
    assert {n: r["outcome"] for n, r in records.items() if "plain" in n} == {
        "test_mixed.py::test_plain_one": "passed",
        "test_mixed.py::test_plain_two": "passed",
    }


def test_without_xdist_the_same_suite_runs_its_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mixed=SUITE.replace('raise AssertionError("never runs under xdist")', "pass")
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(passed=3)


def test_every_workers_durations_are_kept(pytester: pytest.Pytester) -> None:
    """Each worker saving its own would leave the cache with the last one's tests only."""
    plain = "def test_a():\n    pass\n\ndef test_b():\n    pass\n"
    pytester.makepyfile(test_one=plain, test_two=plain, test_three=plain)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=6)
    cached = json.loads((pytester.path / ".pytest_cache/v/cpci/durations").read_text())
    assert sorted(cached) == sorted(
        f"test_{f}.py::test_{t}" for f in ("one", "two", "three") for t in ("a", "b")
    )
