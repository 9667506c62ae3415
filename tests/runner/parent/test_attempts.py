"""The rerun policy on its own: which attempts run, which record is final, what it says.

The worlds are replaced by a list of the outcomes each fresh world would give (the end-to-end
behaviour is in test_reruns.py and test_isolation.py); this covers the corners that would cost
many worlds: a rerun that never ran, a failure alone then a pass, a long list of predecessors.
"""

from __future__ import annotations

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.attempts import Attempt, settle
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.schema import Outcome, RankError, ResultRecord

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def _spec(name: str) -> ConfigSpec:
    return ConfigSpec(nodeid=f"t.py::{name}", path="t.py", world_size=2, backend="gloo", timeout=9)


TARGET = _spec("test_target")


def _attempt(outcome: Outcome, attempt: int) -> AttemptRecord:
    errors = [] if outcome == "passed" else [RankError(rank=1, phase="call", message=outcome)]
    record = ResultRecord(
        nodeid=TARGET.nodeid,
        world_size=2,
        outcome=outcome,
        duration_s=0.1,
        rank_errors=errors,
        attempt=attempt,
    )
    return AttemptRecord(TARGET, record, None, final=False)


class Worlds:
    """Fresh worlds that give the scripted outcomes in turn, and what was asked of them."""

    def __init__(self, *outcomes: Outcome) -> None:
        self.outcomes = list(outcomes)
        self.runs: list[tuple[list[str], int]] = []
        self.sent: list[AttemptRecord] = []

    def run(self, specs: list[ConfigSpec], attempt: int) -> AttemptRecord | None:
        self.runs.append(([s.nodeid for s in specs], attempt))
        return _attempt(self.outcomes.pop(0), attempt)

    def settle(self, policy: RerunPolicy, before: list[ConfigSpec]) -> AttemptRecord:
        first = Attempt(_attempt("failed", 1), before, shared=True)
        return settle(first, policy, self.run, self.sent.append)


def test_a_rerun_that_never_ran_is_no_attempt_and_the_last_failure_stands() -> None:
    worlds = Worlds("failed", "not_run")
    final = worlds.settle(RerunPolicy(reruns=3), [])
    assert [a for _, a in worlds.runs] == [2, 3]  # the third rerun is never tried
    assert final.final
    assert not final.recorded  # attempt 2 was held back: it is the final one
    assert final.result.attempt == 2
    assert final.result.outcome == "failed"
    notes = [e.message for e in final.result.rank_errors if e.rank == -1]
    assert notes == [
        "failed 2/2 attempts",
        "reruns stopped after attempt 2: not_run",
    ]
    assert worlds.sent == []  # attempt 1 was sent before settling; nothing else went out


def test_failing_alone_then_passing_is_flaky_without_a_replay() -> None:
    worlds = Worlds("failed", "passed")
    final = worlds.settle(RerunPolicy(reruns=2, isolate=True), [_spec("test_before")])
    assert worlds.runs == [([TARGET.nodeid], 2), ([TARGET.nodeid], 3)]  # alone both times
    assert [d.result.attempt for d in worlds.sent] == [2]
    assert (final.result.outcome, final.result.flaky, final.result.isolation) == (
        "passed",
        True,
        "flaky",
    )
    assert final.note == "FLAKY: failed 2 of 3 attempts, then passed when rerun alone"


def test_order_dependence_names_a_few_predecessors_and_keeps_the_rank_errors() -> None:
    before = [_spec(f"test_p{i}") for i in range(5)]
    worlds = Worlds("passed", "crashed")
    final = worlds.settle(RerunPolicy(reruns=0, isolate=True), before)
    assert worlds.runs[1] == ([*(s.nodeid for s in before), TARGET.nodeid], 3)
    note, *rest = final.result.rank_errors
    assert note.message == (
        "order-dependent: passes alone, fails after t.py::test_p0, t.py::test_p1, t.py::test_p2 "
        "and 2 more"
    )
    assert "t.py::test_p4" in note.detail
    assert [e.message for e in rest] == ["crashed"]
    assert (final.result.outcome, final.result.isolation) == ("failed", "order-dependent")


def test_without_reruns_or_isolation_nothing_is_rerun() -> None:
    policy = RerunPolicy()
    assert not policy.wants_rerun(_attempt("failed", 1).result, shared=True)
    assert RerunPolicy(isolate=True).alone_runs(shared=False) == 0  # alone already
    assert not RerunPolicy(reruns=2).wants_rerun(_attempt("not_run", 1).result, shared=True)
