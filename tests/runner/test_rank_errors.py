"""The rank that failed first leads `rank_errors`, not rank 0: the service reads only that one."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from cpci.runner.rank_errors import (
    error_line,
    first_failing_first,
    rank_error,
    refusal,
    world_note,
)
from cpci.schema import MAX_DETAIL_LENGTH, MAX_MESSAGE_LENGTH, RankError, ResultRecord
from tests.runner.helpers import RANK1_SEGFAULTS, by_nodeid, results, run_pytest


def _error(rank: int, message: str = "boom") -> RankError:
    return RankError(rank=rank, phase="call", message=message)


def test_earliest_failure_first_then_ranks_without_a_time_then_the_world() -> None:
    errors = [_error(-1, "world"), _error(0), _error(1, "setup"), _error(1, "teardown"), _error(2)]
    ordered = first_failing_first(errors, {1: 5.0, 2: 7.0})
    assert [(e.rank, e.message) for e in ordered] == [
        (1, "setup"),  # a rank's own entries keep their order
        (1, "teardown"),
        (2, "boom"),
        (0, "boom"),  # no failure time known: after those that have one
        (-1, "world"),
    ]


def test_a_world_note_too_long_for_the_schema_is_clipped_not_refused() -> None:
    note = world_note("isolation", "m" * (MAX_MESSAGE_LENGTH + 5), "d" * (MAX_DETAIL_LENGTH + 5))
    assert (note.rank, note.phase) == (-1, "isolation")
    assert (len(note.message), len(note.detail)) == (MAX_MESSAGE_LENGTH, MAX_DETAIL_LENGTH)


def test_error_line_prefers_the_first_e_line_of_a_pytest_traceback() -> None:
    text = (
        "def test():\n>   assert x == 1\nE   assert 2 == 1\nE    +  where 2 = f()\n"
        "\nfile.py:3: AssertionError"
    )
    assert error_line(text) == "assert 2 == 1"
    assert error_line("RuntimeError: boom\n") == "RuntimeError: boom"
    assert error_line("") == ""


def test_a_rank_error_takes_its_first_line_and_is_clipped_to_the_schema() -> None:
    traceback = "E   " + "x" * (MAX_MESSAGE_LENGTH + 5) + "\n" + "frame\n" * MAX_DETAIL_LENGTH
    error = rank_error(1, "call", traceback)
    assert (error.rank, error.phase) == (1, "call")
    assert error.message == "x" * MAX_MESSAGE_LENGTH
    assert error.detail == traceback[:MAX_DETAIL_LENGTH]
    named = rank_error(0, "world", "the whole log", "rank 0 was killed by SIGSEGV")
    assert (named.message, named.detail) == ("rank 0 was killed by SIGSEGV", "the whole log")


def test_a_refusal_names_each_refused_field_and_keeps_the_whole_error() -> None:
    bad = {"nodeid": "t", "world_size": 2, "outcome": "passed", "duration_s": -1.0}
    bad["metrics"] = {"m" * 201: 1.0, "a": 1.0, "b": 2.0, "c": 3.0}
    try:
        ResultRecord.model_validate(bad)
    except ValidationError as exc:
        error = refusal(-1, "the record", exc)
    assert (error.rank, error.phase) == (-1, "world")
    assert error.message == (
        "cpci could not accept the record: duration_s: Input should be greater than or equal to "
        f"0; metrics.{'m' * 40}... (key): String should have at most 200 characters"
    )
    assert "2 validation errors for ResultRecord" in error.detail


SUITE = (
    """
import os, time
import pytest

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)

@pytest.mark.cpci(world_size=2)
def test_rank1_fails_then_rank0_echoes(cpci_dist):
    if cpci_dist.rank == 1:
        assert False, "rank 1 is the cause"
    wait_for(os.environ["MARKS"] + "/rank1-failed")  # written once rank 1's failure is reported
    raise RuntimeError("NCCL error: remote process exited or there was a network error")

@pytest.mark.cpci(world_size=2)
def test_rank1_segfaults_then_rank0_echoes(cpci_dist):
    rank1_segfaults_then_rank0_echoes(cpci_dist)
"""
    + RANK1_SEGFAULTS
)

CONFTEST = """
import os
import pytest

@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.failed and os.environ.get("RANK") == "1":
        open(os.environ["MARKS"] + "/rank1-failed", "w").close()
"""


def test_the_first_failing_rank_leads_after_agreement_and_after_a_crash(tmp_path: Path) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_order.py").write_text(SUITE)
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl", env={"MARKS": str(tmp_path / "marks")})
    result.assert_outcomes(failed=2)
    records = by_nodeid(results(tmp_path / "r.jsonl"))
    agreed = records["test_order.py::test_rank1_fails_then_rank0_echoes"]
    assert agreed["outcome"] == "failed"
    assert [e["rank"] for e in agreed["rank_errors"]] == [1, 0]
    assert "rank 1 is the cause" in agreed["rank_errors"][0]["message"]
    crash = records["test_order.py::test_rank1_segfaults_then_rank0_echoes"]
    assert crash["outcome"] == "crashed"
    first, second = crash["rank_errors"]
    assert first["rank"] == 1
    assert "SIGSEGV" in first["message"]
    assert second["rank"] == 0
    assert second["message"].startswith("rank 0 exited with code 1")
    assert "NCCL error: remote process exited" in second["detail"]
