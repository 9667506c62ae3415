"""The rank that failed first leads `rank_errors`, not rank 0: the service reads only that one."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from cpci.runner.wire.rank_errors import (
    error_line,
    exception_line,
    explain_lost_peers,
    first_failing_first,
    rank_error,
    refusal,
    world_note,
)
from cpci.schema import (
    MAX_DETAIL_LENGTH,
    MAX_MESSAGE_LENGTH,
    RankError,
    ResultRecord,
    is_peer_lost,
)
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


GLOO_ECHO = (
    "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:38035. This is typically caused by a remote worker crashing."
)


def test_a_rank_that_only_echoes_its_peer_follows_the_cause_whatever_the_times() -> None:
    """Failure times race: the echo of rank 1's failure may carry the earlier time."""
    errors = [_error(0, GLOO_ECHO), _error(1, "AssertionError: rank 1 is the cause")]
    ordered = first_failing_first(errors, {0: 5.0, 1: 5.1})
    assert [e.rank for e in ordered] == [1, 0]
    reset = [_error(0, "Connection reset by peer"), _error(1, "remote process exited")]
    assert [e.rank for e in first_failing_first(reset, {0: 2.0, 1: 1.0})] == [1, 0]  # all echo


def test_an_echo_of_peers_that_finished_the_config_says_so() -> None:
    errors = [_error(0, GLOO_ECHO), _error(2, "AssertionError: rank 2 is wrong")]
    explained = explain_lost_peers(
        errors,
        {0: "failed", 1: "passed", 2: "failed"},
        {0: "barrier(group=[0, 1, 2])", 2: None},
    )
    assert [e.message for e in explained] == [
        "ranks 1 (passed), 2 (failed) finished the config and their groups were destroyed; "
        "rank 0 was still in barrier(group=[0, 1, 2])",
        "AssertionError: rank 2 is wrong",
    ]
    one = explain_lost_peers([_error(0, GLOO_ECHO)], {0: "failed", 1: "passed"}, {})
    assert one[0].message == (
        "rank 1 finished the config (passed) and its groups were destroyed; "
        "rank 0 was still in a collective with them"
    )
    # Every rank that said anything lost its peers, or the peers never finished: left alone.
    alone = [_error(0, GLOO_ECHO), _error(1, "Connection reset by peer")]
    assert explain_lost_peers(alone, {0: "failed", 1: "failed"}, {}) == alone
    assert explain_lost_peers([_error(0, GLOO_ECHO)], {0: "failed"}, {}) == [_error(0, GLOO_ECHO)]


def test_the_exception_line_of_a_harness_childs_traceback() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "common_distributed.py", line 700, in run_test\n'
        "    getattr(self, test_name)()\n"
        '  File "test_harness.py", line 9, in test_rank_1_only_fails\n'
        '    assert self.rank != 1, "rank 1 says no"\n'
        "           ^^^^^^^^^^^^^^\n"
        "AssertionError: rank 1 says no\n"
        "assert 1 != 1\n"
    )
    assert exception_line(text) == "AssertionError: rank 1 says no"
    assert exception_line("RuntimeError: no frames\n") == "RuntimeError: no frames"
    assert exception_line("") == ""


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


SUB_GROUP = """
import pytest
import torch.distributed as dist

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("peer", ["passes", "fails"])
def test_rank0_waits_on_a_group_rank1_left(peer, cpci_dist):
    group = cpci_dist.new_group([0, 1])
    dist.barrier(group=group)
    if cpci_dist.rank == 1:
        assert peer == "passes", "rank 1 is the cause"
        return  # cpci destroys the group rank 1 made for this config
    dist.barrier(group=group)
"""


def test_a_peer_that_finished_the_config_is_named_not_a_remote_crash(tmp_path: Path) -> None:
    (tmp_path / "test_sub_group.py").write_text(SUB_GROUP)
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl")
    result.assert_outcomes(failed=2)
    records = by_nodeid(results(tmp_path / "r.jsonl"))
    passes = records["test_sub_group.py::test_rank0_waits_on_a_group_rank1_left[passes]"]
    assert passes["outcome"] == "failed"
    (error,) = passes["rank_errors"]
    assert error["message"] == (
        "rank 1 finished the config (passed) and its groups were destroyed; "
        "rank 0 was still in barrier(group=[0, 1])"
    )
    assert is_peer_lost(error["detail"])  # gloo's own words ("closed"/"reset by peer"), kept
    fails = records["test_sub_group.py::test_rank0_waits_on_a_group_rank1_left[fails]"]
    assert [e["rank"] for e in fails["rank_errors"]] == [1, 0]  # the cause leads
    assert fails["rank_errors"][1]["message"].startswith("rank 1 finished the config (failed)")
    result.stdout.fnmatch_lines(  # each failure's headline, what pytest's summary shows first
        [
            "*_ test_rank0_waits_on_a_group_rank1_left[[]passes[]] _*",
            "rank 1 finished the config (passed) and its groups were destroyed; rank 0 was still "
            "in barrier(group=[[]0, 1[]])",
            "*_ test_rank0_waits_on_a_group_rank1_left[[]fails[]] _*",
            "AssertionError: rank 1 is the cause*; rank 1 finished the config (failed) and *",
        ]
    )
