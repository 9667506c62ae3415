"""Configs skipped by their marks are decided in the parent: they never occupy a world."""

from __future__ import annotations

import pytest

from tests.runner.helpers import by_nodeid, results, worlds_started

SUITE = """
import sys
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", [0, 1])
def test_runs(i, cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
@pytest.mark.skipif(True, reason="no fused kernel here")
def test_skipif_true():
    raise AssertionError("never runs")

@pytest.mark.cpci(world_size=2)
@pytest.mark.skipif("sys.platform != 'plan9'")
def test_skipif_string_condition():
    raise AssertionError("never runs")

@pytest.mark.cpci(world_size=2)
@pytest.mark.skipif(False, reason="not skipped")
def test_skipif_false(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
@pytest.mark.skipif("undefined_name", reason="bad condition")
def test_skipif_bad_condition():
    pass
"""


def test_the_plan_schedules_only_the_configs_that_can_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_skips=SUITE)
    out = pytester.runpytest_subprocess("--cpci-plan").stdout.str()
    assert "cpci plan: 3 config(s) in 1 group(s)" in out
    assert "2 skipped before planning (no world):" in out
    assert "test_skips.py::test_skipif_true: no fused kernel here" in out
    assert "test_skips.py::test_skipif_string_condition: condition: sys.platform != 'plan9'" in out
    assert "not runnable: test_skips.py::test_skipif_bad_condition:" in out


def test_skipped_configs_are_reported_with_their_reason_and_recorded(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_skips=SUITE)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "-rs")
    result.assert_outcomes(passed=3, skipped=2, errors=1)
    out = result.stdout.str()
    assert worlds_started(out) == 1
    assert "(3 config(s))" in out  # only the runnable configs went through the world
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [1] test_skips.py:9: no fused kernel here",
            "SKIPPED [1] test_skips.py:14: condition: sys.platform != 'plan9'",
        ],
        consecutive=False,
    )
    assert "NameError" in out  # the bad condition errors as pytest would say it
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    for name in ("test_skipif_true", "test_skipif_string_condition"):
        record = records[f"test_skips.py::{name}"]
        assert (record["outcome"], record["world_size"], record["batch"]) == ("skipped", 2, None)
    assert records["test_skips.py::test_skipif_false"]["outcome"] == "passed"
