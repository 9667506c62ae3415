"""Which first attempts are followed by reruns, and the rerun rules through the scheduler: a
failure the evidence decides stops at once, one it cannot is rerun, fixed reruns are unchanged,
new configs get their arrival runs within the budget, and each config has one final record."""

from __future__ import annotations

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.parent.evidence import RunEvidence
from cpci.runner.parent.progress import RunStats
from cpci.runner.parent.rerun_policy import ArrivalBudget, RerunPolicy
from cpci.schema import FlakeRecord, Outcome, ResultRecord
from tests.builders import evidence_summary
from tests.runner.helpers import Scripted, Step, attempts_of, group, schedule

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def _record(outcome: Outcome) -> ResultRecord:
    return ResultRecord(nodeid="t.py::test_a", world_size=2, outcome=outcome, duration_s=0.0)


@pytest.mark.parametrize("outcome", ["failed", "error", "crashed", "timeout"])
def test_failures_of_a_config_that_ran_are_rerun(outcome: Outcome) -> None:
    assert RerunPolicy(reruns=1).wants_rerun(_record(outcome), shared=False)


@pytest.mark.parametrize("outcome", ["passed", "skipped", "xfailed", "xpassed", "not_run"])
def test_passes_and_configs_that_never_ran_are_not(outcome: Outcome) -> None:
    assert not RerunPolicy(reruns=3, isolate=True).wants_rerun(_record(outcome), shared=True)


@pytest.mark.parametrize(
    ("policy", "shared", "alone_runs"),
    [
        (RerunPolicy(), True, 0),
        (RerunPolicy(reruns=2), False, 2),
        (RerunPolicy(isolate=True), True, 1),  # isolating is at least one alone run
        (RerunPolicy(isolate=True), False, 0),  # ... of a config that failed in a shared world
        (RerunPolicy(reruns=2, isolate=True), True, 2),  # the isolating run is the first rerun
    ],
)
def test_alone_runs(policy: RerunPolicy, shared: bool, alone_runs: int) -> None:
    assert policy.alone_runs(shared) == alone_runs


# -- the policy through the scheduler, on scripted worlds (tests.runner.helpers.Scripted) -------


def _summary(**records: tuple[int, int]) -> RunEvidence:
    """A summary of the base branch: test name -> (failures, trials) of its record there."""
    known = {
        f"t.py::{name}@2": FlakeRecord(failures=f, trials=t) for name, (f, t) in records.items()
    }
    return RunEvidence(evidence_summary(known, runs=50), "e.json")


def _finals(sent: list[AttemptRecord]) -> dict[str, ResultRecord]:
    finals: dict[str, ResultRecord] = {}
    for record in sent:
        if record.final:
            name = record.spec.nodeid.split("::")[1]
            assert name not in finals, f"{name} has two final records"
            finals[name] = record.result
    return finals


def test_adaptive_reruns_stop_where_the_evidence_decides_and_rerun_where_it_cannot() -> None:
    script = Scripted(
        {"stable": ["failed"], "flaky": ["failed", "passed"], "new": ["failed", "failed"]}
    )
    evidence = _summary(stable=(0, 200), flaky=(10, 40), ok=(0, 200))
    policy = RerunPolicy(reruns=2, mode="adaptive", evidence=evidence)
    sent, stats, _ = schedule([group("stable", "flaky", "new", "ok")], script, policy=policy)
    assert attempts_of(sent) == {
        "stable": [(1, "failed", True)],  # decided at once: no rerun world
        "flaky": [(1, "failed", False), (2, "passed", True)],
        "new": [(1, "failed", False), (2, "failed", False), (3, "failed", True)],  # no history
        "ok": [(1, "passed", True)],
    }
    assert [w.names for w in script.worlds[1:]] == [["flaky"], ["new"], ["new"]]
    finals = _finals(sent)
    assert finals["stable"].stop_reason is not None
    assert finals["stable"].stop_reason.startswith("decided after 1 attempt(s): failed 1/1;")
    assert finals["flaky"].stop_reason == "passed on attempt 2 after 1 failed attempt(s): flaky"
    assert finals["new"].stop_reason == (
        "failed 3/3 attempts: the 2 rerun(s) allowed (--cpci-reruns) are spent"
    )
    assert finals["ok"].stop_reason is None  # a pass is weighed by nothing
    assert stats.decided_after == [("t.py::stable", 1)]
    assert "  t.py::stable: decided after 1 attempt(s)" in stats.summary_lines()


def test_fixed_reruns_are_what_they_were_whatever_the_evidence() -> None:
    steps: dict[str, list[Step]] = {"stable": ["failed", "failed", "passed"]}
    evidence = _summary(stable=(0, 200))
    fixed, _, _ = schedule(
        [group("stable")], Scripted(steps), policy=RerunPolicy(reruns=2, evidence=evidence)
    )
    plain, _, _ = schedule([group("stable")], Scripted(steps), reruns=2)
    assert (
        attempts_of(fixed)
        == attempts_of(plain)
        == {"stable": [(1, "failed", False), (2, "failed", False), (3, "passed", True)]}
    )
    assert [r.result.rerun_reason for r in fixed] == [
        None,
        "fixed reruns: rerun 1 of 2",
        "fixed reruns: rerun 2 of 2",
    ]


def test_new_configs_get_arrival_runs_within_the_budget_and_one_final_record_each() -> None:
    # Four new configs (the summary knows `known` only), 0.125 s a run: the 25% share of the
    # shard's 5 x 0.125 s admits one arrival run; the budget grows with what has run.
    script = Scripted({"n1": ["passed", "failed"]})
    stats = RunStats()
    budget = ArrivalBudget(0.25, stats.configs_s)
    policy = RerunPolicy(new_config_runs=2, evidence=_summary(known=(0, 50)), arrival_budget=budget)
    names = ("known", "n1", "n2", "n3", "n4")
    sent, _, _ = schedule([group(*names)], script, policy=policy, stats=stats)
    finals = _finals(sent)
    assert set(finals) == set(names)
    arrivals = [r.result for r in sent if r.result.arrival]
    written = [r.result for r in sent if not r.recorded]  # the results file's lines
    first_runs = sum(r.duration_s for r in written if not r.arrival)
    assert (len(arrivals), first_runs) == (1, 5 * 0.125)  # a second would take 0.25 > 0.156
    assert attempts_of(sent)["known"] == [(1, "passed", True)]
    # n1 failed its first arrival run: flaky on arrival, its failure the final record.
    assert attempts_of(sent)["n1"] == [(1, "passed", False), (2, "failed", True)]
    assert finals["n1"].arrival
    assert finals["n1"].rank_errors[0].message.startswith("flaky on arrival: passed its first")
    assert stats.flaky_on_arrival == ["t.py::n1"]
    refused = [finals[n] for n in ("n2", "n3", "n4")]
    assert all(r.attempt == 1 and not r.arrival for r in refused)  # the budget was spent
    assert attempts_of(sent)["n2"] == [(1, "passed", False), (1, "passed", True)]  # written once
    assert [r.nodeid for r in written].count("t.py::n2") == 1
    assert any(
        "FLAKY ON ARRIVAL" in line and line.startswith("1 new config(s)")
        for line in stats.summary_lines()
    )
