"""What `settle` makes of a config's first attempt: which attempts run, why, which is final.

The worlds are replaced by functions that give each fresh world's outcome (the end-to-end
behaviour is in test_reruns.py and test_isolation.py); this covers each rule of the rerun
decision (decided, undecided, the cap, no history, fixed), the polluter bisection and a new
config's arrival runs, and the corners that would cost many worlds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.attempts import ISOLATING, Attempt, Settled, settle
from cpci.runner.parent.bisection import replay_bound
from cpci.runner.parent.evidence import RunEvidence
from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.rerun_policy import ArrivalBudget, RerunPolicy
from cpci.schema import (
    FlakeRecord,
    Outcome,
    RankError,
    ResultRecord,
)
from tests.builders import evidence_summary

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
    return AttemptRecord(TARGET, record, [], final=False)


def _evidence(failures: int, trials: int, *, of: str = TARGET.nodeid) -> RunEvidence:
    """A summary holding one config's base-branch record (at the service's defaults)."""
    record = FlakeRecord(failures=failures, trials=trials)
    return RunEvidence(evidence_summary({f"{of}@2": record}, runs=trials), "e.json")


class Worlds:
    """Fresh worlds that give the scripted outcomes in turn (or as `decide` says, from the
    configs each was fed), and what was asked of them."""

    def __init__(
        self, *outcomes: Outcome, decide: Callable[[list[str]], Outcome] | None = None
    ) -> None:
        self.outcomes = list(outcomes)
        self.decide = decide
        self.runs: list[tuple[list[str], int]] = []
        self.sent: list[AttemptRecord] = []

    def run(self, specs: list[ConfigSpec], attempt: int) -> AttemptRecord | None:
        names = [s.nodeid for s in specs]
        self.runs.append((names, attempt))
        if self.outcomes:
            return _attempt(self.outcomes.pop(0), attempt)
        assert self.decide is not None, f"no outcome scripted for attempt {attempt}"
        return _attempt(self.decide(names), attempt)

    def settle(
        self,
        policy: RerunPolicy,
        before: list[ConfigSpec],
        first: Outcome = "failed",
        clock: Callable[[], float] | None = None,
    ) -> Settled:
        start = Attempt(_attempt(first, 1), before, shared=bool(before))
        if clock is None:
            return settle(start, policy, self.run, self.sent.append)
        return settle(start, policy, self.run, self.sent.append, clock=clock)

    def reasons(self) -> list[str | None]:
        return [r.result.rerun_reason for r in self.sent]


def test_a_rerun_that_never_ran_is_no_attempt_and_the_last_failure_stands() -> None:
    worlds = Worlds("failed", "not_run")
    final = worlds.settle(RerunPolicy(reruns=3), []).record
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
    assert final.result.stop_reason is not None
    assert final.result.stop_reason.endswith("; reruns stopped after attempt 2: not_run")
    assert worlds.sent == []  # attempt 1 was sent before settling; nothing else went out


def test_failing_alone_then_passing_is_flaky_without_a_replay() -> None:
    worlds = Worlds("failed", "passed")
    final = worlds.settle(RerunPolicy(reruns=2, isolate=True), [_spec("test_before")]).record
    assert worlds.runs == [([TARGET.nodeid], 2), ([TARGET.nodeid], 3)]  # alone both times
    assert [d.result.attempt for d in worlds.sent] == [2]
    assert (final.result.outcome, final.result.flaky, final.result.isolation) == (
        "passed",
        True,
        "flaky",
    )
    assert final.note == "FLAKY: failed 2 of 3 attempts, then passed when rerun alone"
    assert final.result.stop_reason == "passed on attempt 3 after 2 failed attempt(s): flaky"


def test_a_failure_the_chance_test_decides_stops_there_and_says_so() -> None:
    # 5 failures in 100 base-branch attempts: u = 0.096, so one failure is a flake's often
    # enough to rerun, two (0.9%) are not: decided after 2 attempts, 1 of the 2 reruns spent.
    worlds = Worlds("failed", "failed")
    settled = worlds.settle(RerunPolicy(reruns=2, mode="adaptive", evidence=_evidence(5, 100)), [])
    assert settled.decided
    assert [a for _, a in worlds.runs] == [2]
    final = settled.record.result
    assert final.attempt == 2
    assert final.rerun_reason == (
        "failed 1/1; failure rate <= 0.10 (5/100 attempts failed on the base branch); a flake "
        "fails so with chance 9.6% >= 1.0%: rerun 1 of at most 2"
    )
    assert final.stop_reason is not None
    assert final.stop_reason.startswith("decided after 2 attempt(s): failed 2/2;")
    assert final.stop_reason.endswith("chance 0.9% < 1.0%")


def test_an_undecided_failure_is_rerun_to_the_cap() -> None:
    worlds = Worlds("failed", "crashed", "failed")
    settled = worlds.settle(RerunPolicy(reruns=3, mode="adaptive", evidence=_evidence(10, 40)), [])
    assert not settled.decided  # u = 0.37: even 4 failures (1.9%) could be a flake's
    assert [a for _, a in worlds.runs] == [2, 3, 4]
    reasons = [str(r) for r in worlds.reasons()]
    assert [r.endswith(f"rerun {k} of at most 3") for k, r in enumerate(reasons, 1)] == [True] * 2
    final = settled.record.result
    assert final.rerun_reason is not None
    assert final.rerun_reason.endswith("rerun 3 of at most 3")
    assert final.stop_reason == (
        "failed 4/4 attempts: the 3 rerun(s) allowed (--cpci-reruns) are spent"
    )


def test_a_config_without_history_is_rerun_to_the_cap_stopping_at_its_first_pass() -> None:
    worlds = Worlds("failed", "passed")
    policy = RerunPolicy(reruns=3, mode="adaptive", evidence=_evidence(0, 200, of="t.py::other"))
    settled = worlds.settle(policy, [])
    assert worlds.reasons() == [
        "no history on the base branch to weigh the failure against: rerun 1 of at most 3"
    ]
    final = settled.record.result
    assert (final.attempt, final.outcome, final.flaky) == (3, "passed", True)
    assert final.rerun_reason == (
        "no history on the base branch to weigh the failure against: rerun 2 of at most 3"
    )


def test_fixed_reruns_ignore_the_evidence_and_stop_at_the_first_pass() -> None:
    worlds = Worlds("failed", "passed")
    # The same record decides a failure at once under adaptive reruns (u = 0.0095 < 1%).
    evidence = _evidence(0, 200)
    adaptive = RerunPolicy(reruns=2, mode="adaptive", evidence=evidence)
    assert adaptive.decide([_attempt("failed", 1).result]).kind == "decided"
    settled = worlds.settle(RerunPolicy(reruns=2, mode="fixed", evidence=evidence), [])
    assert worlds.reasons() == ["fixed reruns: rerun 1 of 2"]
    final = settled.record.result
    assert (final.attempt, final.flaky, final.rerun_reason) == (
        3,
        True,
        "fixed reruns: rerun 2 of 2",
    )
    assert final.stop_reason == "passed on attempt 3 after 2 failed attempt(s): flaky"


def test_isolating_runs_alone_once_even_a_failure_the_chance_test_decided() -> None:
    worlds = Worlds("failed")
    policy = RerunPolicy(reruns=2, isolate=True, mode="adaptive", evidence=_evidence(0, 200))
    settled = worlds.settle(policy, [_spec("test_before")])
    final = settled.record.result
    assert (final.attempt, final.isolation, final.rerun_reason) == (2, "fails-alone", ISOLATING)
    assert settled.decided
    assert final.stop_reason is not None
    assert final.stop_reason.startswith("decided after 2 attempt(s)")


def _polluted_by(*polluters: str) -> Callable[[list[str]], Outcome]:
    """The target fails in a world that ran every one of `polluters` before it."""
    return lambda names: "failed" if {f"t.py::{p}" for p in polluters} <= set(names) else "passed"


@pytest.mark.parametrize("polluter", [0, 5, 7])
def test_the_polluter_among_8_is_bisected_and_named_within_the_bound(polluter: int) -> None:
    before = [_spec(f"test_p{i}") for i in range(8)]
    worlds = Worlds("passed", decide=_polluted_by(f"test_p{polluter}"))
    settled = worlds.settle(RerunPolicy(reruns=0, isolate=True), before)
    final = settled.record
    found = final.result.order_dependence
    assert found is not None
    assert found.polluters == [f"t.py::test_p{polluter}"]
    assert found.searched == 8
    replays = len(worlds.runs) - 1  # the alone run, then the replays
    assert found.replays == replays <= replay_bound(8) == 5
    assert worlds.runs[1][0] == [*(s.nodeid for s in before), TARGET.nodeid]  # all of them first
    # Attempts count on through the replays; each replay says why it ran; the last is final.
    assert [a for _, a in worlds.runs] == list(range(2, replays + 3))
    assert [r.result.attempt for r in worlds.sent] == list(range(2, replays + 2))
    assert worlds.reasons()[1] == (
        "order dependence: replay 1 of at most 5, after 8 of its 8 predecessor(s) in its "
        "shared world"
    )
    result = final.result
    assert (result.outcome, result.isolation, result.attempt) == (
        "failed",
        "order-dependent",
        replays + 2,
    )
    note, *rest = result.rank_errors
    assert note.message == (
        f"order-dependent: passes alone, fails after t.py::test_p{polluter}; found in "
        f"{replays} replays among 8 predecessors"
    )
    assert all(s.nodeid in note.detail for s in before)  # the full list is kept
    assert [e.message for e in rest] == ["failed"]
    assert final.note == f"ORDER-DEPENDENT: {note.message.removeprefix('order-dependent: ')}"


def test_two_polluters_together_name_the_smallest_set_and_its_last_failure() -> None:
    before = [_spec(f"test_p{i}") for i in range(8)]
    worlds = Worlds("passed", decide=_polluted_by("test_p2", "test_p3"))
    final = worlds.settle(RerunPolicy(isolate=True), before).record
    found = final.result.order_dependence
    assert found is not None
    assert found.polluters == [f"t.py::test_p{i}" for i in range(4)]
    assert not found.single
    # Replays: all 8 (attempt 3) and p0-p3 (4) fail; p0-p1, p2 and p3 (5-7) pass.
    # The last replay (p3 alone) passed: the final record shows the failure seen before it.
    assert final.reports is None
    assert final.result.outcome == "failed"
    note = final.result.rank_errors[0]
    assert note.message.startswith("order-dependent: passes alone, no single predecessor")
    assert "The last replay (attempt 7) passed; the errors below are attempt 4's." in note.detail
    assert [e.message for e in final.result.rank_errors[1:]] == ["failed"]


def test_the_bisection_time_cap_names_what_was_seen_to_fail() -> None:
    ticks: Iterator[float] = iter(range(100))
    before = [_spec(f"test_p{i}") for i in range(64)]
    worlds = Worlds("passed", decide=_polluted_by("test_p7"))
    policy = RerunPolicy(isolate=True, bisect_time=2)
    final = worlds.settle(policy, before, clock=lambda: next(ticks)).record
    found = final.result.order_dependence
    assert found is not None
    assert len(found.polluters) == 32  # the first half, seen to fail, when the clock ran out
    assert "The search ended early: the bisection's 2 s time cap was reached." in (
        final.result.rank_errors[0].detail
    )


def test_a_failure_the_replay_does_not_bring_back_is_flaky() -> None:
    worlds = Worlds("passed", "passed")
    final = worlds.settle(RerunPolicy(isolate=True), [_spec("test_before")]).record
    assert len(worlds.runs) == 2  # alone, then the one replay after all of them
    assert (final.result.flaky, final.result.isolation, final.result.order_dependence) == (
        True,
        "flaky",
        None,
    )
    assert final.result.stop_reason == (
        "passed on attempt 2 after 1 failed attempt(s): flaky; it passed again when replayed "
        "after its predecessors: not order-dependent"
    )


def _arrival_policy(k: int, budget: ArrivalBudget | None = None) -> RerunPolicy:
    # The summary knows another config only: the target is new to the base branch.
    return RerunPolicy(
        new_config_runs=k, evidence=_evidence(0, 50, of="t.py::other"), arrival_budget=budget
    )


def test_a_new_config_that_passes_gets_its_arrival_runs_all_marked() -> None:
    worlds = Worlds("passed", "passed")
    final = worlds.settle(_arrival_policy(2), [], first="passed").record
    assert worlds.runs == [([TARGET.nodeid], 2), ([TARGET.nodeid], 3)]
    assert [(r.result.attempt, r.result.arrival) for r in [*worlds.sent, final]] == [
        (2, True),
        (3, True),
    ]
    assert worlds.reasons() == [
        "new config: arrival run 1 of 2 (--cpci-new-config-runs): no history on the base branch"
    ]
    assert (final.result.outcome, final.result.stop_reason) == (
        "passed",
        "passed 3/3 runs (2 of 2 arrival run(s))",
    )


def test_a_failure_among_the_arrival_runs_ends_them_and_is_the_final_record() -> None:
    worlds = Worlds("timeout")
    final = worlds.settle(_arrival_policy(3), [], first="passed").record
    assert len(worlds.runs) == 1  # a pass and a failure: nothing more to learn
    result = final.result
    assert (result.attempt, result.outcome, result.arrival, result.flaky) == (
        2,
        "timeout",
        True,
        False,
    )
    assert result.rank_errors[0].message == (
        "flaky on arrival: passed its first run, then failed arrival run 1 of 3, alone in a "
        "fresh world"
    )
    assert final.note is not None
    assert final.note.startswith("FLAKY ON ARRIVAL: passed its first run")


def test_a_new_config_that_fails_first_is_rerun_its_reruns_marked_arrival_runs() -> None:
    # A failure then a pass shows a flaky config being added as an arrival run's failure does.
    policy = RerunPolicy(reruns=2, new_config_runs=2, evidence=_evidence(0, 50, of="t.py::other"))
    worlds = Worlds("passed")
    final = worlds.settle(policy, []).record
    assert worlds.runs == [([TARGET.nodeid], 2)]
    assert (final.result.outcome, final.result.flaky, final.result.arrival) == (
        "passed",
        True,
        True,
    )
    known = RerunPolicy(reruns=2, new_config_runs=2, evidence=_evidence(0, 50))
    assert not Worlds("passed").settle(known, []).record.result.arrival


def test_arrival_runs_stay_within_their_share_of_the_shards_time() -> None:
    # The shard's other attempts took 1 s; a 25% share admits two runs of 0.1 s, not a third.
    spent = {"s": 1.0}
    budget = ArrivalBudget(0.25, lambda: spent["s"])

    def run(specs: list[ConfigSpec], attempt: int) -> AttemptRecord:
        spent["s"] += 0.1
        return _attempt("passed", attempt)

    first = Attempt(_attempt("passed", 1), [], shared=False)
    sent: list[AttemptRecord] = []
    final = settle(first, _arrival_policy(5, budget), run, sent.append).record
    assert final.result.attempt == 3
    assert final.result.stop_reason == (
        "passed 3/3 runs (2 of 5 arrival run(s)); arrival run 3 of 5 not started: new configs' "
        "runs would take more than 25% of the shard's time (--cpci-new-config-share)"
    )


def test_a_config_neither_new_nor_changed_gets_no_arrival_runs() -> None:
    policy = RerunPolicy(new_config_runs=2, evidence=_evidence(0, 50))
    assert policy.arrival_runs(_attempt("passed", 1).result) == 0
    assert not policy.wants_rerun(_attempt("passed", 1).result, shared=True)
    assert _arrival_policy(2).wants_rerun(_attempt("passed", 1).result, shared=True)


def test_a_known_config_whose_test_file_changed_gets_arrival_runs_and_says_why() -> None:
    known = _evidence(0, 50)
    changed = RunEvidence(known.summary, "e.json", changed=frozenset({"t.py"}))
    worlds = Worlds("passed")
    final = worlds.settle(RerunPolicy(new_config_runs=1, evidence=changed), [], first="passed")
    assert final.record.result.rerun_reason == (
        "new config: arrival run 1 of 1 (--cpci-new-config-runs): its test file changed "
        "(--cpci-changed-files)"
    )
