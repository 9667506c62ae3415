"""Verdicts, infra signatures and shifts, from hand-built results (no database)."""

from __future__ import annotations

import statistics
from datetime import datetime, timezone

import pytest

from cpci.evidence import EvidencePolicy, culprit_error
from cpci.evidence import signature as sig
from cpci.evidence.credible import jeffreys_upper, regularized_beta
from cpci.schema import FlakeRecord, FlakinessAssessment, QuarantineState
from cpci.server.analysis.flakiness import BaseEvidence
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.shifts import DURATION_POLICY, METRIC_POLICY, median, robust_shift
from cpci.server.analysis.verdicts import ResultView, decide, quarantined, state_of, weigh_base

P, F = ResultView("passed"), ResultView("failed", culprit="AssertionError: 3e-2 > 1e-3")
SKIP = ResultView("skipped")
USUAL = "AssertionError: max abs err 3.1e-02 > 1e-03"


def known(
    flaky: bool, failures: int = 9, trials: int = 30, signature: str | None = None
) -> FlakinessAssessment:
    """A config's flakiness from trusted history: `failures` of `trials` attempts failed,
    every failure with `signature` (normalised) when given."""
    signatures = {sig(signature): failures} if signature else {}
    return FlakinessAssessment(
        flaky=flaky,
        reason="r",
        runs=trials,
        passes=trials - failures,
        failures=failures,
        flips=6,
        flip_rate=0.5,
        lower_bound=0.3 if flaky else 0.0,
        effective_runs=11.0,
        same_commit=[],
        failing_runs=[],
        record=FlakeRecord(failures=failures, trials=trials, signatures=signatures),
    )


def failed(message: str = USUAL, outcome: str = "failed", attempt: int = 1) -> ResultView:
    return ResultView(outcome, attempt=attempt, messages=(message,), culprit=message)


def attempts(k: int, message: str = USUAL) -> list[ResultView]:
    """k failing attempts at head (the runner's reruns all failed)."""
    return [failed(message, attempt=a) for a in range(1, k + 1)]


@pytest.mark.parametrize(
    ("head", "base", "flaky", "verdict"),
    [
        ([F], [P], None, "new_failure"),
        ([F], [P], known(False), "new_failure"),
        ([F], [P], known(True), "flaky"),
        ([F], [F], known(True), "flaky"),
        ([F], [F], known(False), "broken_at_base"),
        ([F], [P, F], None, "flaky"),  # the base itself passed and failed
        ([F, P], [P], None, "flaky"),  # the head itself passed and failed
        ([ResultView("passed", flaky=True)], [P], None, "flaky"),
        ([F], None, None, "no_baseline"),
        ([P], [F], None, "fixed"),
        ([P], None, None, "passed"),
        ([SKIP], [F], None, "skipped"),
        ([failed("Watchdog caught collective operation timeout", "timeout")], [P], None, "infra"),
        ([failed("hung in all_to_all", "timeout")], [P], None, "new_failure"),
        # Built without a culprit (no rank_errors to pick it from): its first message speaks.
        (
            [ResultView("timeout", messages=("Watchdog caught collective operation timeout",))],
            [P],
            None,
            "infra",
        ),
    ],
)
def test_decide(
    head: list[ResultView],
    base: list[ResultView] | None,
    flaky: FlakinessAssessment | None,
    verdict: str,
) -> None:
    assert decide(head, base, flaky).verdict == verdict


def test_no_baseline_carries_the_note() -> None:
    note = "no results at base aaaa; used ancestor bbbb, 3 commit(s) behind"
    assert decide([F], None, None, note).reason == note


def test_known_flaky_config_failing_every_one_of_three_attempts_is_a_new_failure() -> None:
    # Flaky at 0.3 (9 of 30): a flake fails 3 of 3 attempts with chance <= 0.45^3 = 9%.
    decision = decide(attempts(3), [P], known(True, 9, 30, USUAL))
    assert decision.verdict == "new_failure"
    test = decision.evidence
    assert test is not None
    assert test.failed_attempts == 3
    assert test.rate_upper == pytest.approx(jeffreys_upper(9, 30, 0.95), abs=1e-4)
    assert test.chance == pytest.approx(test.rate_upper**3, rel=1e-3)
    assert "failed 3/3 attempts; known flaky rate <= 0.45; chance 9.0% < 20%" in decision.reason
    assert "(9/30 attempts failed on branch runs)" in decision.reason
    assert f"chance {test.chance:.1%}" in decision.reason


def test_one_failed_attempt_with_the_usual_signature_stays_flaky() -> None:
    decision = decide(attempts(1), [P], known(True, 9, 30, USUAL))
    assert decision.verdict == "flaky"
    assert "failed 1/1 attempt; known flaky rate <= 0.45; chance 44.8% >= 20%" in decision.reason


def test_a_new_signature_makes_a_single_failure_the_prs() -> None:
    # Every one of 9 flaky failures showed one signature: a new one is seen 1 time in 10.
    head = attempts(1, "RuntimeError: shape mismatch [4, 128] vs [4, 64]")
    decision = decide(head, [P], known(True, 9, 30, USUAL))
    assert decision.verdict == "new_failure"
    assert decision.evidence is not None
    assert decision.evidence.novel_signature
    assert decision.evidence.novel_share == pytest.approx(0.1)
    assert "new error signature" in decision.reason


def test_signatures_that_differ_only_in_numbers_are_the_usual_one() -> None:
    head = attempts(1, "AssertionError: max abs err 7.7e-01 > 1e-03")
    decision = decide(head, [P], known(True, 9, 30, USUAL))
    assert decision.evidence is not None
    assert not decision.evidence.novel_signature
    assert decision.verdict == "flaky"


@pytest.mark.parametrize(("scale", "verdict"), [(1.0, "flaky"), (1.001, "new_failure")])
def test_the_threshold_is_the_boundary(scale: float, verdict: str) -> None:
    # Flaky at 0.5 (10 of 20): a flake fails 3 of 3 with chance u^3; at the threshold it is
    # still a flake's doing, just above the threshold it is not.
    chance = jeffreys_upper(10, 20, 0.95) ** 3
    policy = EvidencePolicy(threshold=chance * scale, level=0.95)
    assert decide(attempts(3), [P], known(True, 10, 20), policy=policy).verdict == verdict


def test_a_higher_credible_level_is_more_cautious() -> None:
    history = known(True, 6, 20)
    loose = decide(attempts(3), [P], history, policy=EvidencePolicy(0.2, level=0.6))
    strict = decide(attempts(3), [P], history, policy=EvidencePolicy(0.2, level=0.999))
    assert loose.evidence is not None
    assert strict.evidence is not None
    assert loose.evidence.rate_upper < strict.evidence.rate_upper
    assert (loose.verdict, strict.verdict) == ("new_failure", "flaky")


def test_no_failure_in_trusted_history_is_no_flaky_label() -> None:
    decision = decide(attempts(1), [P], known(False, 0, 30))
    assert decision.verdict == "new_failure"


def test_a_config_that_never_ran_is_infra_with_its_reason() -> None:
    never = ResultView(
        "not_run",
        messages=("not run: world did not come up after 2 respawns",),
        culprit="not run: world did not come up after 2 respawns",
    )
    decision = decide([never], [P], None)
    assert decision.verdict == "infra"
    assert decision.reason == "not run: world did not come up after 2 respawns"
    assert decide([never], None, None).verdict == "infra"  # not even "no baseline"


def test_order_dependent_is_a_failure_naming_its_predecessors() -> None:
    note = (
        "ORDER-DEPENDENT: passes alone, but fails again after the configs that ran before it in "
        "its world: tests/a.py::x[1], tests/a.py::y[2]"
    )
    head = [
        failed(attempt=1),
        ResultView("passed", attempt=2),
        ResultView(
            "failed", attempt=3, isolation="order-dependent", messages=(note,), culprit=note
        ),
    ]
    assert state_of(head) == "fail"
    decision = decide(head, [P], known(True))
    assert decision.verdict == "new_failure"
    assert decision.reason == (
        "order-dependent: fails after tests/a.py::x[1], tests/a.py::y[2]; passes alone"
    )
    assert decide(head, [F], None).verdict == "broken_at_base"
    assert decide(head, [F, P], None).verdict == "broken_at_base"  # mixed at the base
    # Nothing at the base to compare with, or only a skip there: no baseline, not a new failure.
    no_base = decide(head, None, None)
    assert no_base.verdict == "no_baseline"
    assert no_base.reason.endswith("; no result at the base to compare with")
    untrusted = "NO BASELINE: the base branch is not trusted"
    assert decide(head, None, None, baseline_note=untrusted).reason.endswith(f"; {untrusted}")
    assert decide(head, [ResultView("skipped")], None).verdict == "no_baseline"
    # The runner's note, first in rank_errors before the rank's own error, as it writes it now.
    note = "order-dependent: passes alone, fails after tests/a.py::x[1], tests/a.py::y[2]"
    detail = "Failed in a shared world, passed alone, and failed again ... in that world:\nx\ny"
    errors = [
        {"rank": -1, "phase": "isolation", "message": note, "detail": detail},
        {"rank": 0, "phase": "call", "message": "AssertionError: out not close"},
    ]
    marked = ResultView(
        "failed",
        isolation="order-dependent",
        messages=(note, detail, "AssertionError: o"),
        culprit=culprit_error(errors),
    )
    assert decide([marked], [P], None).reason == (
        "order-dependent: fails after tests/a.py::x[1], tests/a.py::y[2]; passes alone"
    )
    many = ", ".join(f"tests/a.py::t[{i}]" for i in range(300))
    crowded = [ResultView("failed", isolation="order-dependent", culprit=f"fails after: {many}")]
    assert len(decide(crowded, [P], None).reason) < 600


SEGFAULT = [
    {"rank": 1, "phase": "call", "message": "Fatal Python error: Segmentation fault"},
    {"rank": 0, "phase": "call", "message": "NCCL error in: x.cpp:1, remote process exited"},
    {"rank": -1, "phase": "world", "message": "NCCL error: unhandled system error"},
]


def test_infra_rules_read_the_rank_that_failed_first() -> None:
    culprit = culprit_error(SEGFAULT)
    assert culprit.startswith("Fatal Python error")
    crash = ResultView("crashed", messages=("...",), culprit=culprit)
    assert decide([crash], [P], None).verdict == "new_failure"
    # Whatever order the ranks' errors arrive in, a peer's death is not the cause.
    assert culprit_error([SEGFAULT[1], SEGFAULT[0]]).startswith("Fatal Python error")
    everyone_lost = [SEGFAULT[1], {**SEGFAULT[1], "rank": 1}]
    assert infra_signature("crashed", (culprit_error(everyone_lost),)) is not None
    # The world-level entry speaks only when no rank does.
    assert culprit_error(SEGFAULT[2:]) == "NCCL error: unhandled system error"


def test_an_infra_looking_failure_on_every_attempt_while_the_base_passes_is_the_prs() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert decide([failed(oom, "error")], [P], None).verdict == "infra"
    repeated = [failed(oom, "error", attempt=a) for a in (1, 2, 3)]
    assert decide(repeated, [P], None).verdict == "new_failure"
    assert decide(repeated, [failed(oom, "error")], None).verdict == "infra"


def test_a_base_failing_with_another_error_does_not_explain_the_heads_failure() -> None:
    shape = "RuntimeError: shape mismatch [4, 128] vs [4, 64]"
    decision = decide([failed(shape)], [failed()], None)
    assert decision.verdict == "new_failure"
    assert f"with another error ({USUAL}), so the base does not explain it" in decision.reason
    # The same error, its numbers aside, is the broken base's.
    same = failed("AssertionError: max abs err 7.7e-01 > 1e-03")
    assert decide([same], [failed()], None).verdict == "broken_at_base"
    # A failure without error text at either end cannot be told apart: the base's.
    assert decide([failed(shape)], [ResultView("failed")], None).verdict == "broken_at_base"
    assert decide([ResultView("failed")], [failed()], None).verdict == "broken_at_base"
    # The base's error is quoted within the reason's 200 characters for it.
    long_error = "RuntimeError: " + "x" * 400
    reason = decide([failed(shape)], [failed(long_error)], None).reason
    assert f"with another error ({long_error[:199]}…), so" in reason
    # One of exactly 200 is quoted whole.
    at_limit = "RuntimeError: " + "y" * 186
    reason = decide([failed(shape)], [failed(at_limit)], None).reason
    assert f"with another error ({at_limit}), so" in reason


def test_a_quarantined_config_names_who_why_and_since_and_what_it_would_be() -> None:
    held = QuarantineState(
        since=datetime(2026, 11, 3, tzinfo=timezone.utc), by="ci-bot", reason="r" * 400
    )
    decision = quarantined(decide([failed()], [P], None), held)
    assert (decision.verdict, decision.would_be) == ("quarantined", "new_failure")
    assert decision.reason.startswith(f"quarantined by ci-bot since 2026-11-03 ({'r' * 199}…); ")


#: Flaky at ~0.8 (24 of 30) before the base's streak: it explains 3 failures in a row (0.51).
OFTEN = known(True, 24, 30, USUAL)
#: Flaky at ~0.2 (3 of 30): it does not explain 2 failures in a row (0.05).
RARELY = known(True, 3, 30, USUAL)


@pytest.mark.parametrize(
    ("history", "streak", "broken", "why"),
    [
        (OFTEN, 1, False, "its flakiness explains its failures at the base (failed 1/1"),
        (
            OFTEN,
            2,
            False,
            "its flakiness explains its failures at the base and in the base-branch run before "
            "it (failed 2/2",
        ),
        # BROKEN_STREAK runs in a row are a breakage, however likely for the flake.
        (OFTEN, 3, True, ", as in the 2 base-branch runs before it"),
        (
            RARELY,
            2,
            True,
            "; its flakiness does not explain its failures at the base and in the base-branch "
            "run before it: failed 2/2",
        ),
        (known(False, 0, 30), 1, True, ""),  # not known to flake: the base's failure is its own
        (None, 1, True, ""),  # no history before the streak to weigh it against
    ],
)
def test_a_base_failure_is_weighed_against_the_flakiness_before_it(
    history: FlakinessAssessment | None, streak: int, broken: bool, why: str
) -> None:
    evidence = BaseEvidence(history, streak, failed_attempts=streak, signatures=(sig(USUAL),))
    weighed = weigh_base([failed()], [failed()], evidence, EvidencePolicy())
    assert weighed.broken is broken
    assert weighed.why.startswith(why)
    if not broken:
        assert weighed.why.endswith("so the head is judged as if the base passed")


def test_a_base_that_passed_and_failed_is_the_flake_record_the_head_is_tested_against() -> None:
    # One failure in two attempts: failed, passed.
    decision = decide([failed()], [failed(), ResultView("passed", attempt=2)], None)
    assert decision.evidence is not None
    assert (decision.evidence.history_failures, decision.evidence.history_trials) == (1, 2)
    # A result that passed on the runner's rerun is one failed attempt and one passed.
    rerun_passed = [ResultView("passed", flaky=True), ResultView("passed")]
    decision = decide([failed()], rerun_passed, None)
    assert decision.evidence is not None
    assert (decision.evidence.history_failures, decision.evidence.history_trials) == (1, 3)
    assert "(1/3 attempts failed on branch runs)" in decision.reason
    # A result that never ran is no attempt: still one failure in two.
    never_ran = [failed(), ResultView("passed", attempt=2), ResultView("not_run", attempt=3)]
    decision = decide([failed()], never_ran, None)
    assert decision.evidence is not None
    assert (decision.evidence.history_failures, decision.evidence.history_trials) == (1, 2)


def test_jeffreys_upper_bound_matches_known_quantiles() -> None:
    assert regularized_beta(0.3, 2, 3) == pytest.approx(0.3483, abs=1e-4)
    assert jeffreys_upper(5, 10, 0.5) == pytest.approx(0.5, abs=1e-9)  # symmetric posterior
    # Beta(0.5, 20.5)'s 95% quantile after 0 failures in 20, checked by integrating its density.
    assert jeffreys_upper(0, 20, 0.95) == pytest.approx(0.09048, abs=1e-5)
    assert jeffreys_upper(0, 0, 0.95) == 1.0
    with pytest.raises(ValueError, match="credible level"):
        jeffreys_upper(1, 2, 1.5)


@pytest.mark.parametrize(
    ("outcome", "message", "rule"),
    [
        (
            "crashed",
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(...)",
            "nccl-watchdog",
        ),
        (
            "error",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "cuda-oom",
        ),
        ("crashed", "The runner has received a shutdown signal.", "lost-runner"),
        ("crashed", "NCCL error in: ..., unhandled system error", "nccl-system"),
        ("crashed", "GPU 3 has fallen off the bus", "gpu-lost"),
        ("failed", "CUDA out of memory", None),  # a test body's OOM may be the PR's doing
        ("crashed", "Segmentation fault in flash_attn_fwd", None),
    ],
)
def test_infra_signatures(outcome: str, message: str, rule: str | None) -> None:
    found = infra_signature(outcome, [message])
    assert (found.name if found else None) == rule


def test_duration_regression_needs_noise_relative_and_absolute_margins() -> None:
    base = [1.00, 1.02, 0.98, 1.01, 0.99]
    shift = robust_shift("duration_s", base, 1.60, DURATION_POLICY)
    assert shift is not None
    assert shift.direction == "up"
    assert shift.relative == pytest.approx(0.6)
    assert robust_shift("duration_s", base, 1.10, DURATION_POLICY) is None  # within 25%
    assert robust_shift("duration_s", [0.01] * 5, 0.05, DURATION_POLICY) is None  # under 50 ms
    assert robust_shift("duration_s", base, 0.3, DURATION_POLICY) is None  # faster is fine
    assert robust_shift("duration_s", [1.0, 1.0], 9.0, DURATION_POLICY) is None  # too few
    noisy = [1.0, 2.0, 0.5, 1.8, 0.7]
    assert robust_shift("duration_s", noisy, 1.6, DURATION_POLICY) is None  # within the noise


def test_metric_drift_flags_both_directions() -> None:
    grown = robust_shift("max_abs_err", [1e-4, 1.1e-4], 5e-3, METRIC_POLICY)
    assert grown is not None
    assert grown.direction == "up"
    shrunk = robust_shift("tflops", [100.0], 20.0, METRIC_POLICY)
    assert shrunk is not None
    assert shrunk.direction == "down"
    assert robust_shift("max_abs_err", [1e-4], 1.2e-4, METRIC_POLICY) is None


@pytest.mark.parametrize(
    "values", [[2.0], [3.0, 1.0], [5.0, 1.0, 3.0], [4.0, 1.0, 3.0, 2.0], [1.0] * 5]
)
def test_median_is_the_statistics_median(values: list[float]) -> None:
    assert median(values) == statistics.median(values)


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(statistics.StatisticsError):
        median([])
