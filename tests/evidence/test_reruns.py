"""The rerun rule: a pass or a decided failure stops, an undecided one is rerun up to the cap.

Each case is the rule written out in numbers (u from `jeffreys_upper`, u^k against the stop
level), so a change to the rule or to the chance test it rests on fails here.
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
from cpci.evidence.reruns import STOP_CHANCE
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


def test_a_stable_config_failing_is_decided_after_one_rerun() -> None:
    """u = 0.047 for 0 of 40: one failure has a chance of 4.7%, above the 1% stop level (a
    flake that rare would be called the PR's about 1 run in 20); two have 0.2%, below it."""
    u = jeffreys_upper(0, 40, 0.95)
    first, second = (decide_rerun(attempts(k), STABLE, RerunRule()) for k in (1, 2))
    assert u > STOP_CHANCE > u**2
    assert (first.rerun, first.kind) == (True, "undecided")
    assert first.why.endswith(">= 1.0%: rerun 1 of at most 2")
    assert (second.rerun, second.kind) == (False, "decided")
    assert second.chance is not None
    assert second.chance.chance == pytest.approx(u**2)
    assert second.why.startswith("decided after 2 attempt(s): failed 2/2")
    assert second.why.endswith("< 1.0%")


def test_a_known_flake_is_rerun_until_a_flake_would_fail_so_less_than_once_in_100() -> None:
    """9 of 30: u = 0.448; u^5 = 0.018 is still above 1%, u^6 = 0.008 stops. At the verdict's
    threshold (20%) the third failure would already stop it."""
    u = jeffreys_upper(9, 30, 0.95)
    rule = RerunRule(cap=8)
    seen = [decide_rerun(attempts(k), FLAKY, rule) for k in range(1, 7)]
    assert [d.rerun for d in seen] == [u**k >= STOP_CHANCE for k in range(1, 7)]
    assert [d.kind for d in seen] == ["undecided"] * 5 + ["decided"]
    assert seen[0].why.endswith("rerun 1 of at most 8")
    at_threshold = RerunRule(cap=8, stop_chance=0.2)
    assert decide_rerun(attempts(3), FLAKY, at_threshold).kind == "decided"


def test_the_stop_level_bounds_how_often_a_flake_stops_early() -> None:
    """Whatever the record, the reruns stop at the first k with u^k below the stop level: a
    flake at its bound u fails k times in a row with a chance below it."""
    for failures, trials in ((0, 40), (2, 40), (5, 40), (9, 30), (12, 30), (1, 8)):
        evidence = ConfigEvidence(
            record=FlakeRecord(failures=failures, trials=trials, signatures={signature(USUAL): 1}),
            runs=trials,
        )
        u = jeffreys_upper(failures, trials, 0.95)
        for stop in (0.05, 0.01, 0.002):
            rule = RerunRule(cap=20, stop_chance=stop)
            k = next(n for n in range(1, 21) if not decide_rerun(attempts(n), evidence, rule).rerun)
            assert u**k < stop <= u ** (k - 1), (failures, trials, stop, k)


def test_a_new_signature_decides_sooner() -> None:
    """A config whose 9 flaky failures all showed one signature shows a new one 1 time in 10:
    0.448 x 0.1 = 4.5% and 0.448^2 x 0.1 = 2.0% rerun, 0.448^3 x 0.1 = 0.9% stops, where the
    usual signature takes six failures."""
    new = "RuntimeError: NCCL ring broke"
    first = decide_rerun(attempts(1, new), FLAKY, RerunRule())
    assert first.chance is not None
    assert first.chance.novel_signature
    assert first.chance.chance == pytest.approx(jeffreys_upper(9, 30, 0.95) * 0.1)
    assert first.kind == "undecided"
    assert decide_rerun(attempts(3, new), FLAKY, RerunRule(cap=5)).kind == "decided"
    assert decide_rerun(attempts(3), FLAKY, RerunRule(cap=5)).kind == "undecided"


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
    """The stop level is never looser than the threshold the evidence summary states: a
    service judging at 0.1% stops the reruns there, and 0.2% for two failures is not enough."""
    strict = RerunRule(evidence=EvidencePolicy(threshold=0.001))
    assert (strict.stop, RerunRule().stop) == (0.001, STOP_CHANCE)
    assert decide_rerun(attempts(2), STABLE, strict).kind == "undecided"
    assert decide_rerun(attempts(2), STABLE, RerunRule()).kind == "decided"
    loose = RerunRule(evidence=EvidencePolicy(threshold=0.5))
    assert loose.stop == STOP_CHANCE


def test_a_rule_or_a_call_that_makes_no_sense_says_so() -> None:
    with pytest.raises(ValueError, match="the rerun cap must be >= 0, got -1"):
        RerunRule(cap=-1)
    for stop in (0.0, 1.0):
        with pytest.raises(ValueError, match=f"stop level must be between 0 and 1, got {stop}"):
            RerunRule(stop_chance=stop)
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
