"""The results line made for each way an attempt ends."""

from __future__ import annotations

from cpci.runner.parent.attempt_records import Where, of_agreed, of_ended_world, of_not_run
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.world import WorldFailure
from cpci.runner.wire.protocol import AgreedRecord
from cpci.runner.wire.rank_errors import rank_error
from cpci.schema import BatchInfo

SPEC = ConfigSpec(
    nodeid="t.py::test_a[2]", path="t.py", world_size=2, backend="gloo", timeout=9, params={"n": 2}
)

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)
WHERE = Where(attempt=2, backend="gloo", batch=BatchInfo(index=1, world=0, size=4, start_s=0.5))


def test_an_agreed_attempt_keeps_its_reports_metrics_and_errors() -> None:
    error = rank_error(1, "call", "E   boom")
    agreed = AgreedRecord(
        index=0,
        outcome="failed",
        duration_s=1.5,
        rank_errors=[error],
        reports=[{"when": "call"}],
        report_rank=1,
        metrics={"err": 0.1},
    )
    sent = of_agreed(SPEC, agreed, WHERE)
    assert (sent.spec, sent.reports, sent.final) == (SPEC, [{"when": "call"}], False)
    record = sent.result
    assert (record.nodeid, record.world_size, record.params) == (SPEC.nodeid, 2, {"n": 2})
    assert (record.outcome, record.duration_s, record.attempt) == ("failed", 1.5, 2)
    assert (record.rank_errors, record.metrics, record.batch) == (
        [error],
        {"err": 0.1},
        WHERE.batch,
    )
    assert record.backend == "gloo"


def test_the_attempt_its_world_died_in_is_blamed_with_the_world_s_errors() -> None:
    errors = [rank_error(0, "world", "tail of the log", "rank 0 was killed by SIGSEGV (pid 1)")]
    failure = WorldFailure("crashed", 0, 2.5, errors, "rank 0 was killed by SIGSEGV (pid 1)")
    sent = of_ended_world(SPEC, failure, WHERE)
    assert sent.reports is None
    assert (sent.result.outcome, sent.result.duration_s, sent.result.rank_errors) == (
        "crashed",
        2.5,
        errors,
    )


def test_an_attempt_that_never_began_says_why_in_a_world_note() -> None:
    record = of_not_run(SPEC, "world start-up failed: boom", "the log", WHERE).result
    assert (record.outcome, record.duration_s) == ("not_run", 0.0)
    [note] = record.rank_errors
    assert (note.rank, note.phase) == (-1, "world")
    assert note.message == "not run: world start-up failed: boom"
    assert note.detail == "not run: world start-up failed: boom\nthe log"
