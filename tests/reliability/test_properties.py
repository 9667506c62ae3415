"""Properties of the analysis functions, over generated histories (hypothesis).

A verdict never says NEW FAILURE when the base failed the same way, nor for a config that passes
at head; a NEW FAILURE is always a head failure against a passing base, unexplained by flakiness
or infrastructure. Flakiness never labels a config with fewer than the minimum branch runs and no
same-commit pass and failure, and always labels one with such same-commit evidence.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpci.schema import FAILING_OUTCOMES, OUTCOMES
from cpci.server.analysis.flakiness import (
    FlakinessAssessment,
    FlakinessPolicy,
    assess_flakiness,
    wilson_lower_bound,
)
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.observations import Observation, RunLink
from cpci.server.analysis.verdicts import ResultView, decide, state_of

MESSAGES = st.sampled_from(
    ["", "AssertionError: mismatch", "CUDA out of memory", "NCCL error: unhandled system error",
     "watchdog caught collective operation timeout", "<b>x</b> @octocat"]
)  # fmt: skip
RESULTS = st.builds(
    ResultView,
    outcome=st.sampled_from(OUTCOMES),
    duration_s=st.floats(0, 100),
    flaky=st.booleans(),
    messages=st.tuples(MESSAGES) | st.just(()),
)
HEADS = st.lists(RESULTS, min_size=1, max_size=4)


def assessment(flaky: bool) -> FlakinessAssessment:
    return FlakinessAssessment(
        flaky=flaky, reason="generated", runs=10, passes=5, failures=5, flips=3, flip_rate=0.3,
        lower_bound=0.1, effective_runs=9.0, same_commit=[], failing_runs=[],
    )  # fmt: skip


KNOWN = st.none() | st.builds(assessment, st.booleans())


@settings(max_examples=150, deadline=None)
@given(head=HEADS, known=KNOWN)
def test_no_new_failure_when_the_base_failed_the_same_way(
    head: list[ResultView], known: FlakinessAssessment | None
) -> None:
    assert decide(head, list(head), known).verdict != "new_failure"


@settings(max_examples=150, deadline=None)
@given(head=HEADS, base=st.none() | st.lists(RESULTS, max_size=4), known=KNOWN)
def test_a_new_failure_is_a_failure_nothing_else_explains(
    head: list[ResultView], base: list[ResultView] | None, known: FlakinessAssessment | None
) -> None:
    decision = decide(head, base, known)
    if state_of(head) in ("pass", "skip"):
        assert decision.verdict in ("passed", "fixed", "skipped")
    if decision.verdict != "new_failure":
        return
    assert state_of(head) == "fail"
    assert base
    assert state_of(base) == "pass"
    assert not (known and known.flaky)
    assert all(infra_signature(r.outcome, r.messages) is None for r in head)
    assert any(r.outcome in FAILING_OUTCOMES for r in head)


COMMITS = st.sampled_from(["a" * 40, "b" * 40, "c" * 40, "d" * 40])


@st.composite
def histories(draw: st.DrawFn) -> list[Observation]:
    n = draw(st.integers(0, 30))
    out = []
    for i in range(n):
        commit = draw(COMMITS)
        out.append(
            Observation(
                run=RunLink(ci_run_id=str(i), ci_attempt=1, commit=commit, url=""),
                run_id=draw(st.integers(0, 60)),
                environment_id=draw(st.integers(1, 2)),
                outcome=draw(st.sampled_from(OUTCOMES)),
                flaky=draw(st.integers(0, 9)) == 0,  # a rerun flake is rare
                on_pull_request=draw(st.booleans()),
            )
        )
    return out


def same_commit_evidence(history: list[Observation]) -> bool:
    groups: dict[tuple[str, int], list[Observation]] = {}
    for o in history:
        if o.counted:
            groups.setdefault((o.run.commit, o.environment_id), []).append(o)
    return any(
        (any(o.passed for o in g) and any(o.failed for o in g)) or any(o.flaky for o in g)
        for g in groups.values()
    )


@settings(max_examples=150, deadline=None)
@given(history=histories(), min_runs=st.integers(1, 30), threshold=st.floats(0.01, 0.9))
def test_flakiness_needs_enough_runs_or_same_commit_evidence(
    history: list[Observation], min_runs: int, threshold: float
) -> None:
    policy = FlakinessPolicy(min_runs=min_runs, threshold=threshold)
    result = assess_flakiness(history, policy)
    branch_runs = len({o.run_id for o in history if o.counted and not o.on_pull_request})
    evidence = same_commit_evidence(history)
    assert result.runs == branch_runs
    if evidence:
        assert result.flaky
        assert result.same_commit
    elif branch_runs < min_runs:
        assert not result.flaky, result.reason
    assert result.flaky == bool(
        evidence or (branch_runs >= min_runs and result.lower_bound >= threshold)
    )
    assert 0.0 <= result.lower_bound <= max(result.flip_rate, 0.0) + 1e-9


# n is an effective sample size: 0 without data, else at least 1 (one weighted pair).
@given(p=st.floats(0, 1), n=st.just(0.0) | st.floats(1, 1e6))
def test_wilson_lower_bound_is_a_proportion_below_the_estimate(p: float, n: float) -> None:
    lower = wilson_lower_bound(p, n)
    assert 0.0 <= lower <= p + 1e-9
