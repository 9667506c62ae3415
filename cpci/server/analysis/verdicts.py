"""One config's verdict for a PR: its head results against its base results and history.

The order of the checks is the policy: same-commit flakiness first (the head itself passed and
failed, e.g. a rerun passed), then infrastructure faults, then "no baseline", then flakiness
(at the base commit, or known from history, evidence attached), then broken at base, and only
then NEW FAILURE, so a NEW FAILURE is a failure nothing else explains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple

from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.flakiness import FlakinessAssessment
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.observations import PASSING_OUTCOMES

State = Literal["pass", "fail", "mixed", "skip"]


class ResultView(NamedTuple):
    """One result of one config, as a verdict needs it (a tuple: reports build tens of
    thousands; treat `metrics` as read-only)."""

    outcome: str
    duration_s: float = 0.0
    flaky: bool = False
    messages: tuple[str, ...] = ()
    metrics: Mapping[str, float] = MappingProxyType({})
    ranks: tuple[int, ...] = ()  # the ranks that reported an error


def state_of(results: Sequence[ResultView]) -> State:
    """Pass, fail, mixed (passed and failed on the same commit) or skip (nothing counted)."""
    failed = passed = False
    for r in results:  # one pass: called twice per config of a report
        if r.flaky:
            return "mixed"
        if r.outcome in FAILING_OUTCOMES:
            failed = True
        elif r.outcome in PASSING_OUTCOMES:
            passed = True
    if failed and passed:
        return "mixed"
    return "fail" if failed else ("pass" if passed else "skip")


def headline(results: Sequence[ResultView]) -> str:
    """The outcome to show: the first failing one if any failed, else the first."""
    failing = [r.outcome for r in results if r.outcome in FAILING_OUTCOMES]
    return failing[0] if failing else (results[0].outcome if results else "missing")


def failing_ranks(results: Sequence[ResultView]) -> list[int]:
    """Every rank that reported an error in these results: "rank 1 only" points at a rank."""
    return sorted({rank for r in results for rank in r.ranks})


def first_message(results: Sequence[ResultView]) -> str | None:
    for r in results:
        for m in r.messages:
            if m:
                return m.splitlines()[0][:300]
    return None


@dataclass(frozen=True)
class Decision:
    verdict: Literal[
        "new_failure", "broken_at_base", "flaky", "infra", "fixed", "no_baseline", "passed",
        "skipped",
    ]  # fmt: skip
    reason: str
    infra_rule: str | None = None


#: The common decisions, made once (immutable, so shared): a report decides for every config.
_SKIPPED = Decision("skipped", "skipped at head")
_FIXED = Decision("fixed", "failed at base, passes at head")
_PASSED = Decision("passed", "passes at head")
_FLAKY_AT_HEAD = Decision("flaky", "passed and failed at the head commit itself")


def decide(
    head: Sequence[ResultView],
    base: Sequence[ResultView] | None,
    known: FlakinessAssessment | None,
    baseline_note: str = "",
) -> Decision:
    """The verdict for one config. `base` is None when the baseline has no result for it."""
    head_state = state_of(head)
    base_state = state_of(base) if base else None
    if head_state == "skip":
        return _SKIPPED
    if head_state == "pass":
        if base_state == "fail":
            return _FIXED
        return _PASSED
    if head_state == "mixed":
        return _FLAKY_AT_HEAD
    for r in head:
        rule = infra_signature(r.outcome, r.messages)
        if rule is not None:
            return Decision("infra", f"{r.outcome}: {rule.description}", rule.name)
    if base_state is None:
        return Decision("no_baseline", baseline_note or "no result at the base to compare with")
    if base_state == "mixed":
        return Decision("flaky", "passed and failed at the base commit")
    if known is not None and known.flaky:
        return Decision("flaky", f"known flaky: {known.reason}")
    if base_state == "fail":
        return Decision("broken_at_base", "fails at base too")
    reason = "passes at base, fails at head"
    if known is not None:
        reason += f"; not explained by flakiness ({known.reason})"
    return Decision("new_failure", reason)
