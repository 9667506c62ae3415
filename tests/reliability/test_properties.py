"""Properties of the analysis functions, over generated histories (hypothesis).

A verdict never says NEW FAILURE when the base failed the same way, nor for a config that passes
at head; a NEW FAILURE is always a head failure against a passing base, unexplained by flakiness
(a known flake's chance of failing like that is below the threshold) or infrastructure (no infra
signature on the rank that failed first, or one that repeated on every attempt). Flakiness never
labels a config that never failed, nor one with fewer than the minimum branch runs and no
same-commit pass and failure, and always labels one with such same-commit evidence.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpci.schema import (
    FAILING_OUTCOMES,
    OUTCOMES,
    FlakeRecord,
    FlakinessAssessment,
    OrderDependence,
    RunLink,
)
from cpci.schema import NOT_RUN_OUTCOMES as NOT_RUN
from cpci.server.analysis.flakiness import (
    FlakinessPolicy,
    assess_flakiness,
    wilson_lower_bound,
)
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.observations import Observation
from cpci.server.analysis.verdicts import (
    INFRA_REPEATS,
    ResultView,
    culprit_of,
    decide,
    state_of,
)
from tests.builders import flaky_evidence

MESSAGES = st.sampled_from(
    [
        "",
        "AssertionError: mismatch",
        "CUDA out of memory",
        "NCCL error: unhandled system error",
        "watchdog caught collective operation timeout",
        "<b>x</b> @octocat",
    ]
)
RESULTS = st.builds(
    ResultView,
    outcome=st.sampled_from(OUTCOMES),
    duration_s=st.floats(0, 100),
    flaky=st.booleans(),
    messages=st.tuples(MESSAGES) | st.just(()),
    attempt=st.integers(1, 3),
    isolation=st.none() | st.sampled_from(["fails-alone", "order-dependent", "flaky"]),
    culprit=MESSAGES,
    arrival=st.booleans(),
    stop_reason=st.none()
    | st.sampled_from(["decided after 2 attempt(s): failed 2/2", "passed on attempt 2"]),
    order_dependence=st.none()
    | st.builds(
        OrderDependence,
        polluters=st.lists(st.sampled_from(["t.py::a", "t.py::b"]), min_size=1, max_size=2),
        replays=st.integers(0, 10),
        searched=st.integers(1, 64),
    ),
)
HEADS = st.lists(RESULTS, min_size=1, max_size=4)


def assessment(flaky: bool, failures: int, trials: int) -> FlakinessAssessment:
    record = FlakeRecord(failures=min(failures, trials), trials=trials)
    return flaky_evidence(flaky=flaky, record=record)


KNOWN = st.none() | st.builds(assessment, st.booleans(), st.integers(0, 40), st.integers(0, 40))


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
        assert decision.verdict in ("passed", "fixed", "skipped", "infra", "no_baseline")
    if decision.verdict != "new_failure":
        return
    assert state_of(head) == "fail"
    assert base
    assert state_of(base) == "pass"
    if any(r.isolation == "order-dependent" for r in head):
        return  # reproduced after its predecessors: neither a flake nor the machine
    if known and known.flaky and known.record.trials:
        assert decision.evidence is not None
        assert decision.evidence.chance < decision.evidence.threshold
    failing = [r for r in head if r.outcome in FAILING_OUTCOMES and r.outcome not in NOT_RUN]
    infra_looking = any(infra_signature(r.outcome, (culprit_of(r),)) for r in failing)
    assert not infra_looking or len(failing) >= INFRA_REPEATS
    assert failing


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


def intermittent(history: list[Observation]) -> bool:
    """Failing branch runs that came and went: several stretches, or one single run."""
    runs: dict[int, bool] = {}
    for o in history:
        if o.counted and not o.on_pull_request:
            runs[o.run_id] = runs.get(o.run_id, False) or o.failed or o.flaky
    text = "".join("F" if failed else "P" for failed in runs.values())
    stretches = [len(s) for s in text.split("P") if s]
    return bool(stretches) and (len(stretches) > 1 or stretches[0] == 1)


@settings(max_examples=150, deadline=None)
@given(history=histories(), min_runs=st.integers(1, 30))
def test_flakiness_needs_enough_runs_or_same_commit_evidence(
    history: list[Observation], min_runs: int
) -> None:
    policy = FlakinessPolicy(min_runs=min_runs)
    result = assess_flakiness(history, policy)
    branch_runs = len({o.run_id for o in history if o.counted and not o.on_pull_request})
    evidence = same_commit_evidence(history)
    assert result.runs == branch_runs
    if evidence:
        assert result.flaky
        assert result.same_commit
    elif branch_runs < min_runs:
        assert not result.flaky, result.reason
    if not any(o.failed or o.flaky for o in history if o.counted):
        assert not result.flaky  # no label on no evidence
    assert result.flaky == bool(evidence or (branch_runs >= min_runs and intermittent(history)))
    assert 0.0 <= result.lower_bound <= max(result.flip_rate, 0.0) + 1e-9


# n is an effective sample size: 0 without data, else at least 1 (one weighted pair).
@given(p=st.floats(0, 1), n=st.just(0.0) | st.floats(1, 1e6))
def test_wilson_lower_bound_is_a_proportion_below_the_estimate(p: float, n: float) -> None:
    lower = wilson_lower_bound(p, n)
    assert 0.0 <= lower <= p + 1e-9
