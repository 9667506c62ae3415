"""A demo job's line counts configs by their final records and its reruns apart."""

from __future__ import annotations

from pathlib import Path

from cpci.demo.history import MAIN
from cpci.demo.jobs import Job, JobRun
from cpci.schema import Outcome, ResultRecord


def attempt(name: str, n: int, outcome: Outcome, flaky: bool = False) -> ResultRecord:
    nodeid = f"t.py::test_cp2[{name}]"
    return ResultRecord(
        nodeid=nodeid, world_size=2, outcome=outcome, duration_s=1, attempt=n, flaky=flaky
    )


def test_a_flaky_config_is_one_config_and_its_rerun_is_counted_apart() -> None:
    records = [attempt(f"c{i}", 1, "passed") for i in range(107)]
    records += [attempt("flaky", 1, "failed"), attempt("flaky", 2, "passed", flaky=True)]
    done = JobRun(Job(MAIN[1], 0), Path("r.jsonl"), records, seconds=30.4)
    assert done.summary() == (
        "main~2 shard 1/1: 108 config(s): 108 passed (1 flaky); "
        "1 rerun(s) of 1 config(s): 1 passed; in 30 s"
    )


def test_a_broken_config_fails_once_however_often_it_was_rerun() -> None:
    records = [attempt("ok", 1, "passed")]
    records += [attempt("broken", n, "failed") for n in (1, 2, 3)]
    done = JobRun(Job(MAIN[0], 0), Path("r.jsonl"), records, seconds=5)
    assert done.summary() == (
        "main~3 shard 1/1: 2 config(s): 1 failed, 1 passed (0 flaky); "
        "2 rerun(s) of 1 config(s): 2 failed; in 5 s"
    )
    clean = JobRun(Job(MAIN[0], 0), Path("r.jsonl"), records[:1], seconds=5)
    assert clean.summary() == "main~3 shard 1/1: 1 config(s): 1 passed (0 flaky); no reruns; in 5 s"
