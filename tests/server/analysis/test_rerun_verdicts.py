"""What the runner's reruns, arrival runs and bisections add to a verdict, from hand-built results
(no database): FLAKY ON ARRIVAL and where it sits among the checks, the polluter an
order-dependent failure names, "decided after k attempts" from the runner's own stop reason, and
a quarantined config listed apart and never gating, in the report and the gate alike."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from cpci.evidence import RerunRule, decide_rerun
from cpci.github.gate import gate
from cpci.schema import (
    ArrivalRuns,
    ConfigEvidence,
    FlakeRecord,
    FlakinessAssessment,
    OrderDependence,
    QuarantineState,
)
from cpci.server.analysis.pull_report import ConfigLeg, build_report
from cpci.server.analysis.verdicts import ResultView, decide, decided_after
from tests.builders import record
from tests.server.analysis.test_pull_report import PASSED, failed, inputs, key, policy
from tests.server.analysis.test_verdicts import known

P = ResultView("passed")
ERROR = "AssertionError: max abs err 3.1e-02 > 1e-03"
WATCHDOG = "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...)"


def arrival(outcome: str = "passed", message: str = ERROR) -> ResultView:
    """One of a new config's arrival runs (alone, in a fresh world, after its first run)."""
    if outcome == "passed":
        return ResultView("passed", arrival=True)
    return ResultView(outcome, messages=(message,), culprit=message, arrival=True)


#: A config that passed its first run, then failed one of its two arrival runs.
ONE_OF_TWO = [P, arrival("failed"), arrival()]


def test_a_new_config_that_fails_an_arrival_run_is_flaky_on_arrival() -> None:
    decision = decide(ONE_OF_TWO, None, None, "no result at the base")
    assert decision.verdict == "flaky_on_arrival"
    assert decision.arrival == ArrivalRuns(failed=1, runs=3)
    assert decision.reason == (
        "passed and failed at the head commit itself (1 of 3 runs failed, arrival runs "
        "included); it is new to the base branch: a flaky config is being added"
    )


def test_a_new_config_whose_first_failure_a_rerun_passes_is_flaky_on_arrival() -> None:
    # The runner marks a new config's reruns as arrival runs: a fail and a pass all the same.
    decision = decide([ResultView("failed"), arrival()], None, None, "no result at the base")
    assert (decision.verdict, decision.arrival) == (
        "flaky_on_arrival",
        ArrivalRuns(failed=1, runs=2),
    )
    # Without arrival runs (the runner did not run it as new) the same head is plain flaky.
    assert decide([ResultView("failed"), P], None, None).verdict == "flaky"


def test_a_stable_config_the_pr_makes_flaky_is_flaky_on_arrival_too() -> None:
    # Its test file changed, so it had arrival runs; the base passes and it was stable there.
    stable = known(False, failures=0, trials=30)
    decision = decide([P, arrival(), arrival("failed")], [P], stable)
    assert decision.verdict == "flaky_on_arrival"
    assert "this PR makes it flaky" in decision.reason


@pytest.mark.parametrize(
    ("head", "base", "history", "why"),
    [
        # Flaky before the PR: its trusted history says so.
        (ONE_OF_TWO, [P], known(True), "known flaky on the base branch before this PR"),
        # Flaky before the PR: the base fails it too.
        (ONE_OF_TWO, [ResultView("failed")], None, "it fails at the base too"),
        # Every failure is an infrastructure fault's, not the config's.
        ([P, arrival("timeout", WATCHDOG), arrival()], None, None, "(1 of 3 runs failed"),
    ],
)
def test_flaky_before_the_pr_or_not_on_its_arrival_runs_stays_flaky(
    head: list[ResultView],
    base: list[ResultView] | None,
    history: FlakinessAssessment | None,
    why: str,
) -> None:
    decision = decide(head, base, history)
    assert decision.verdict == "flaky"
    assert why in decision.reason


def test_no_arrival_runs_is_plain_flaky_at_head() -> None:
    decision = decide([ResultView("failed"), ResultView("passed", attempt=2)], None, None)
    assert (decision.verdict, decision.arrival) == ("flaky", None)


def test_an_order_dependent_arrival_is_a_failure_naming_its_polluter_first() -> None:
    # Order dependence comes before the arrival check: it names the cause.
    found = OrderDependence(polluters=["t.py::test_leaks_state"], replays=7, searched=64)
    marked = ResultView(
        "failed", isolation="order-dependent", order_dependence=found, culprit=ERROR
    )
    decision = decide([marked, ResultView("passed", attempt=2), arrival()], [P], None)
    assert decision.verdict == "new_failure"
    assert decision.order_dependence == found
    assert decision.reason == (
        "order-dependent: fails after t.py::test_leaks_state; found in 7 replays among 64 "
        "predecessors; passes alone"
    )


def test_an_order_dependent_failure_without_a_bisection_names_what_its_note_says() -> None:
    note = "order-dependent: passes alone, fails after t.py::test_a"
    marked = ResultView("failed", isolation="order-dependent", messages=(note,))
    decision = decide([marked], [P], None)
    assert decision.reason == "order-dependent: fails after t.py::test_a; passes alone"
    assert decision.order_dependence is None


def test_decided_after_reads_the_runners_own_stop_reason() -> None:
    # The stop reason the runner writes, made by the runner's rule itself: a stable config's
    # two failures are decided (u^2 is far below the threshold), so it is not rerun a third time.
    evidence = ConfigEvidence(record=FlakeRecord(failures=0, trials=40), runs=40)
    attempts = [record("p2p", "failed", message=ERROR, attempt=n) for n in (1, 2)]
    stop = decide_rerun(attempts, evidence, RerunRule(cap=3))
    assert (stop.rerun, stop.kind) == (False, "decided")
    head = [
        ResultView("failed", attempt=1, culprit=ERROR),
        ResultView("failed", attempt=2, culprit=ERROR, stop_reason=stop.why),
    ]
    assert decided_after(head) == 2
    capped = decide_rerun(attempts, None, RerunRule(cap=1))  # stopped by the cap, not decided
    assert decided_after([head[1]._replace(stop_reason=capped.why)]) is None


HELD = QuarantineState(
    since=datetime(2026, 11, 20, tzinfo=timezone.utc), by="token:ci-bot", reason="#1234 flakes"
)


def test_a_quarantined_config_is_listed_apart_and_never_gates() -> None:
    head = {ConfigLeg(1): failed(attempts=3), ConfigLeg(2): ONE_OF_TWO, ConfigLeg(3): PASSED}
    base = {ConfigLeg(1): PASSED, ConfigLeg(3): PASSED}
    quarantines = {key(1): HELD, key(2): HELD}
    report = build_report(replace(inputs(head, base), quarantined=quarantines), policy())
    assert (report.new_failures, report.flaky_on_arrival) == ([], [])
    assert [q.config for q in report.quarantined] == [key(1), key(2)]
    first, second = report.quarantined
    assert (first.would_be, second.would_be) == ("new_failure", "flaky_on_arrival")
    assert first.quarantine == HELD
    assert first.reason.startswith(
        "quarantined by token:ci-bot since 2026-11-20 (#1234 flakes); at head: new failure ("
    )
    assert second.arrival == ArrivalRuns(failed=1, runs=3)
    assert report.counts.by_verdict == {"passed": 1, "quarantined": 2}
    assert report.summary.startswith("all passed, 2 quarantined;")
    for fail_on in ("new-failures", "any-failure"):
        assert gate(report, None, fail_on) == "success", fail_on
    # Without the quarantines the same head fails the gate on both.
    open_report = build_report(inputs(head, base), policy())
    assert [v.config for v in open_report.new_failures] == [key(1)]
    assert [v.config for v in open_report.flaky_on_arrival] == [key(2)]
    assert gate(open_report, None) == "failure"


def test_a_report_carries_arrival_polluter_and_decided_after_per_config() -> None:
    found = OrderDependence(polluters=["t.py::test_x", "t.py::test_y"], replays=9, searched=8)
    stop = "decided after 2 attempt(s): failed 2/2; a flake fails so with chance 0.4% < 20%"
    head = {
        ConfigLeg(1): ONE_OF_TWO,
        ConfigLeg(2): [
            ResultView("failed", isolation="order-dependent", order_dependence=found),
            ResultView("passed", attempt=2),
        ],
        ConfigLeg(3): [*failed(attempts=1), failed()[0]._replace(attempt=2, stop_reason=stop)],
    }
    report = build_report(inputs(head, dict.fromkeys(head, PASSED)), policy())
    (arrived,) = report.flaky_on_arrival
    assert (arrived.arrival, arrived.attempts) == (ArrivalRuns(failed=1, runs=3), 3)
    polluted, decided = report.new_failures
    assert polluted.order_dependence == found
    assert "no single predecessor explains it; fails after t.py::test_x, t.py::test_y" in (
        polluted.reason
    )
    assert (decided.decided_after, decided.attempts) == (2, 2)
    assert polluted.decided_after is None
    assert report.summary.startswith("2 new failure(s), 1 flaky on arrival;")
    assert gate(report, None) == "failure"
