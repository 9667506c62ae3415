"""The rerun rule: a pass or a decided failure stops, an undecided one is rerun up to the cap.

Each case is the rule written out in numbers (u from `jeffreys_upper`, u^k against the
threshold), so a change to the rule or to the chance test it rests on fails here.
"""

from __future__ import annotations

import pytest

from cpci.evidence import (
    EvidencePolicy,
    RerunRule,
    arrival_runs,
    decide_rerun,
    jeffreys_upper,
    signature,
)
from cpci.schema import ConfigEvidence, FlakeRecord, ResultRecord
from tests.builders import record

USUAL = "AssertionError: max abs err 0.031 > 0.01"
FLAKY = ConfigEvidence(
    record=FlakeRecord(failures=9, trials=30, signatures={signature(USUAL): 9}), flaky=True, runs=30
)
STABLE = ConfigEvidence(record=FlakeRecord(failures=0, trials=40), runs=40)


def failed(attempt: int, message: str = USUAL) -> ResultRecord:
    return record("p2p", "failed", message=message, attempt=attempt)


def attempts(k: int, message: str = USUAL) -> list[ResultRecord]:
    return [failed(n, message) for n in range(1, k + 1)]


def test_a_pass_ends_the_reruns_and_one_after_failures_is_flaky() -> None:
    first = decide_rerun([record("p2p")], FLAKY, RerunRule())
    assert (first.rerun, first.kind, first.why) == (False, "passed", "passed on attempt 1")
    later = decide_rerun([failed(1), record("p2p", attempt=2, flaky=True)], FLAKY, RerunRule())
    assert (later.rerun, later.kind) == (False, "passed")
    assert later.why == "passed on attempt 2 after 1 failed attempt(s): flaky"


@pytest.mark.parametrize("outcome", ["skipped", "not_run"])
def test_what_did_not_fail_in_the_code_is_never_rerun(outcome: str) -> None:
    decision = decide_rerun([record("p2p", outcome)], None, RerunRule())  # type: ignore[arg-type]
    assert (decision.rerun, decision.kind) == (False, "not-a-failure")


def test_a_stable_config_failing_once_is_decided_without_a_rerun() -> None:
    """u = 0.047 for 0 of 40: one failure has a chance of 4.7% under any flake it could be."""
    decision = decide_rerun(attempts(1), STABLE, RerunRule())
    assert jeffreys_upper(0, 40, 0.95) < 0.2
    assert (decision.rerun, decision.kind) == (False, "decided")
    assert decision.chance is not None
    assert decision.chance.chance < 0.2
    assert decision.why.startswith("decided after 1 attempt(s): failed 1/1")


def test_a_known_flake_is_rerun_until_the_chance_test_decides() -> None:
    """9 of 30: u = 0.448; 0.448 >= 0.2 and 0.448^2 = 0.20 >= 0.2 rerun, 0.448^3 = 0.09 stops."""
    u = jeffreys_upper(9, 30, 0.95)
    rule = RerunRule(cap=5)
    seen = [decide_rerun(attempts(k), FLAKY, rule) for k in (1, 2, 3)]
    assert [d.rerun for d in seen] == [u >= 0.2, u**2 >= 0.2, u**3 >= 0.2] == [True, True, False]
    assert [d.kind for d in seen] == ["undecided", "undecided", "decided"]
    assert seen[0].why.endswith("rerun 1 of at most 5")


def test_a_new_signature_decides_sooner() -> None:
    """A config whose 9 flaky failures all showed one signature shows a new one 1 time in 10."""
    decision = decide_rerun(attempts(1, "RuntimeError: NCCL ring broke"), FLAKY, RerunRule())
    assert decision.chance is not None
    assert decision.chance.novel_signature
    assert decision.chance.chance == pytest.approx(jeffreys_upper(9, 30, 0.95) * 0.1)
    assert (decision.rerun, decision.kind) == (False, "decided")


def test_the_cap_stops_what_nothing_decided() -> None:
    decision = decide_rerun(attempts(3), None, RerunRule(cap=2))
    assert (decision.rerun, decision.kind) == (False, "cap")
    assert "the 2 rerun(s) allowed (--cpci-reruns) are spent" in decision.why
    assert decide_rerun(attempts(1), FLAKY, RerunRule(cap=0)).kind == "cap"


def test_no_history_is_rerun_up_to_the_cap() -> None:
    for evidence in (None, ConfigEvidence(record=FlakeRecord(failures=0, trials=0), runs=0)):
        decision = decide_rerun(attempts(1), evidence, RerunRule())
        assert (decision.rerun, decision.kind) == (True, "no-history")


def test_fixed_reruns_every_failure_cap_times_whatever_the_evidence() -> None:
    rule = RerunRule(mode="fixed", cap=2)
    kinds = [decide_rerun(attempts(k), STABLE, rule).kind for k in (1, 2, 3)]
    assert kinds == ["fixed", "fixed", "cap"]


def test_the_rule_takes_the_services_numbers() -> None:
    """The same failure is decided or not by the threshold the evidence summary states."""
    strict = RerunRule(evidence=EvidencePolicy(threshold=0.5))
    assert decide_rerun(attempts(1), FLAKY, strict).kind == "decided"
    assert decide_rerun(attempts(1), FLAKY, RerunRule()).kind == "undecided"


def test_a_rule_or_a_call_that_makes_no_sense_says_so() -> None:
    with pytest.raises(ValueError, match="the rerun cap must be >= 0, got -1"):
        RerunRule(cap=-1)
    with pytest.raises(ValueError, match="adaptive, fixed"):
        RerunRule(mode="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the config's attempts"):
        decide_rerun([], None, RerunRule())


def test_new_configs_and_changed_test_files_get_their_arrival_runs() -> None:
    assert arrival_runs(None, False, 2) == 2
    assert (
        arrival_runs(ConfigEvidence(record=FlakeRecord(failures=0, trials=0), runs=0), False, 2)
        == 2
    )
    assert arrival_runs(STABLE, False, 2) == 0
    assert arrival_runs(STABLE, True, 3) == 3
    with pytest.raises(ValueError, match="--cpci-new-config-runs must be >= 0"):
        arrival_runs(None, False, -1)
