"""One config's verdict for a PR: its head results against its base results and history.

The order of the checks is the policy (docs/verdicts.md tells it at length):

1. passes or skipped at head: passed, fixed or skipped;
2. order-dependent at head (fails after its predecessors, passes alone): a failure, never flaky,
   naming the polluter the runner's bisection found;
3. passed and failed at head itself: FLAKY ON ARRIVAL when the runner ran it as new (arrival
   runs: a config new to the base branch, or whose test file the PR changed) and neither its
   base nor its trusted history shows it flaky before the PR (a flaky config is being added:
   it gates), else flaky;
4. never ran at head (`not_run` only): infra;
5. an infrastructure signature on the rank that failed first: infra, unless it failed every one
   of several attempts while the base passes (then it is the PR's);
6. no result at the base: no baseline;
7. known flaky from trusted history, *and* the failures at head are likely enough for that flake
   (`cpci.evidence.chance`): flaky, with the numbers;
8. fails at base too, *and* the base's own evidence says the base is broken (`weigh_base`: it
   failed every attempt with a chance under its flakiness before the base below the
   threshold, or it failed in consecutive base-branch runs): broken at base; a base failure
   its flakiness explains is weighed like a pass, so a flaky base cannot hide a regression;
9. NEW FAILURE: a failure nothing else explains, with the numbers that ruled flakiness out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal, NamedTuple

from cpci.evidence import EvidencePolicy, flake_test, signature
from cpci.schema import (
    FAILING_OUTCOMES,
    NOT_RUN_OUTCOMES,
    ArrivalRuns,
    FlakeRecord,
    FlakeTest,
    FlakinessAssessment,
    OrderDependence,
    QuarantineState,
    Verdict,
    first_line,
)
from cpci.schema.verdicts import info
from cpci.server.analysis.flakiness import BaseEvidence
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.observations import PASSING_OUTCOMES

State = Literal["pass", "fail", "mixed", "skip"]
ORDER_DEPENDENT = "order-dependent"
#: Infra-looking failures on at least this many attempts, all failing, while the base passes,
#: are the PR's: a transient fault does not repeat on every rerun.
INFRA_REPEATS = 2
#: The most characters of uploaded text (predecessors, a not-run reason) one reason quotes.
REASON_PART = 500


class ResultView(NamedTuple):
    """One result of one config, as a verdict needs it (a tuple: reports build tens of
    thousands; treat `metrics` as read-only)."""

    outcome: str
    duration_s: float = 0.0
    flaky: bool = False
    messages: tuple[str, ...] = ()
    metrics: Mapping[str, float] = MappingProxyType({})
    ranks: tuple[int, ...] = ()  # the ranks that reported an error
    attempt: int = 1
    isolation: str | None = None
    culprit: str = ""  # the error of the rank that failed first (see `culprit_error`)
    arrival: bool = False  # one of a new config's extra runs (`--cpci-new-config-runs`)
    stop_reason: str | None = None  # the final attempt: why the runner's reruns stopped
    order_dependence: OrderDependence | None = None  # the polluter its bisection found


def culprit_of(result: ResultView) -> str:
    """The culprit's error, else (a result built without one) its first message."""
    return result.culprit or next(iter(result.messages), "")


def state_of(results: Sequence[ResultView]) -> State:
    """Pass, fail, mixed (passed and failed on the same commit) or skip (nothing counted; a
    config that never ran counts as nothing). An order-dependent result makes the config
    failing: its passing solo rerun is no flake."""
    failed = passed = False
    for r in results:  # one pass: called twice per config of a report
        if r.isolation == ORDER_DEPENDENT:
            return "fail"
        if r.outcome in NOT_RUN_OUTCOMES:
            continue  # it never ran: says nothing either way
        if r.flaky:
            passed = failed = True
        elif r.outcome in FAILING_OUTCOMES:
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
    """The first line of the first failing rank's error (else of any message)."""
    for r in results:
        for m in (r.culprit, *r.messages):
            if m:
                return first_line(m)
    return None


#: Failing base-branch runs in a row, ending with the base run, that make the base broken
#: whatever its flakiness; shorter streaks are weighed by the chance test.
BROKEN_STREAK = 3


@dataclass(frozen=True)
class BaseWeighed:
    """Whether a failure at the base counts as the base being broken, and why."""

    broken: bool
    why: str


@dataclass(frozen=True)
class Decision:
    """A verdict, why, and the evidence it shows: the infra rule, the chance test's numbers, the
    arrival runs, the polluter; a quarantined config's keeps what it would be without it."""

    verdict: Verdict
    reason: str
    infra_rule: str | None = None
    evidence: FlakeTest | None = None
    arrival: ArrivalRuns | None = None
    order_dependence: OrderDependence | None = None
    quarantine: QuarantineState | None = None
    would_be: Verdict | None = None


#: The common decisions, made once (immutable, so shared): a report decides for every config.
_SKIPPED = Decision("skipped", "skipped at head")
_FIXED = Decision("fixed", "failed at base, passes at head")
_PASSED = Decision("passed", "passes at head")
_FLAKY_AT_HEAD = Decision("flaky", "passed and failed at the head commit itself")
DEFAULT_POLICY = EvidencePolicy()
#: Where the runner's order-dependent note names the predecessors: "order-dependent: passes
#: alone, fails after X, Y" (one line), or "... fails again after the configs that ran before
#: it in its world: X, Y" (an older wording).
_PREDECESSORS = (
    re.compile(r"\bworld:[ \t]*(\S[^\n]*)", re.IGNORECASE),
    re.compile(r"\bfails (?:again )?after (?!the configs)([^\n]+)", re.IGNORECASE),
)


def decide(
    head: Sequence[ResultView],
    base: Sequence[ResultView] | None,
    known: FlakinessAssessment | None,
    baseline_note: str = "",
    policy: EvidencePolicy = DEFAULT_POLICY,
    base_evidence: BaseEvidence | None = None,
) -> Decision:
    """The verdict for one config. `base` is None when the baseline has no result for it;
    `known` is its flakiness from trusted history (None when not looked up); `base_evidence`
    what the base branch's history says of a failure at the base (None: not looked up, and a
    failure at the base counts as the base being broken)."""
    head_state = state_of(head)
    base_state = state_of(base) if base else None
    if head_state == "pass":  # the common case first: a report decides for every config
        return _FIXED if base_state == "fail" else _PASSED
    ran = [r for r in head if r.outcome not in NOT_RUN_OUTCOMES]
    if head_state == "skip":
        return _not_run(head) if len(ran) < len(head) else _SKIPPED
    order = _order_dependent(ran)
    if order is not None:
        return _order_dependent_against_base(order, base_state, baseline_note)
    if head_state == "mixed":
        arrival = arrival_runs(ran)
        if arrival is None:
            return _FLAKY_AT_HEAD
        return _flaky_at_arrival(arrival, ran, base_state, known)
    failing = [r for r in ran if r.outcome in FAILING_OUTCOMES]
    repeated = len(failing) >= INFRA_REPEATS and base_state == "pass"
    for r in failing:
        rule = infra_signature(r.outcome, (culprit_of(r),))
        if rule is not None and not repeated:
            return Decision("infra", f"{r.outcome}: {rule.description}", rule.name)
    if base_state is None:
        return Decision("no_baseline", baseline_note or "no result at the base to compare with")
    if base_state == "skip":
        return Decision("no_baseline", "skipped or never ran at the base: nothing to compare with")
    test = _flake_test(failing, base, known, policy)
    if test is not None and test.flake_explains:
        why = known.reason if known is not None and known.flaky else "passed and failed at base"
        return Decision("flaky", f"known flaky: {test.text()}; {why}", evidence=test)
    reason = "passes at base, fails at head"
    if base_state == "fail" and base:
        weighed = weigh_base(failing, base, base_evidence, policy)
        if weighed.broken:
            return Decision("broken_at_base", f"fails at base too{weighed.why}", evidence=test)
        reason = f"fails at head; {weighed.why}"
    if base_state == "mixed":
        reason = "passed and failed at base, fails at head"
    if test is not None:
        reason += f"; not explained by flakiness: {test.text()}"
    elif known is not None:
        reason += f"; not explained by flakiness ({known.reason})"
    return Decision("new_failure", reason, evidence=test)


def weigh_base(
    failing: Sequence[ResultView],
    base: Sequence[ResultView],
    evidence: BaseEvidence | None,
    policy: EvidencePolicy,
) -> BaseWeighed:
    """Does the base's failure explain the head's `failing` results, as a broken base would?

    Not when the head fails another way: a broken base fails the head as it fails itself, so
    when every error at the base and at the head has a signature and no signature is shared,
    the head's failure is its own (Dr. CI matches a failure with the base's the same way).
    Otherwise the same chance test as the head's: the failing attempts of the base-branch runs
    it failed in a row, up to and with the base run, against the config's flakiness before
    them. A known-flaky config that failed its one attempt at the base by chance is judged as
    if the base passed (pytorch/pytorch#107333: a flaky base job misleads); `BROKEN_STREAK`
    runs in a row are a breakage whatever the chance. Without history to weigh it against, or
    for a config not known to flake, a failure at the base is the base's."""
    at_base = [r for r in base if r.outcome in FAILING_OUTCOMES - NOT_RUN_OUTCOMES]
    base_errors, head_errors = _signatures(at_base), _signatures(failing)
    if base_errors and head_errors and not base_errors & head_errors:
        shown = first_message(at_base) or "another error"
        return BaseWeighed(
            False,
            f"it fails at the base too, but with another error ({_clip(shown, 200)}), so the "
            "base does not explain it",
        )
    if evidence is None:
        return BaseWeighed(True, "")
    before = evidence.streak - 1
    if evidence.streak >= BROKEN_STREAK:
        return BaseWeighed(True, f", as in the {before} base-branch runs before it")
    known = evidence.known
    if known is None or not known.flaky or not known.record.trials:
        return BaseWeighed(True, "")
    test = flake_test(known.record, evidence.failed_attempts, evidence.signatures, policy)
    where = "at the base" + (" and in the base-branch run before it" if before else "")
    if not test.flake_explains:
        why = f"; its flakiness does not explain its failures {where}: {test.text()}"
        return BaseWeighed(True, why)
    return BaseWeighed(
        False,
        f"its flakiness explains its failures {where} ({test.text()}), so the head is judged "
        "as if the base passed",
    )


def _signatures(results: Sequence[ResultView]) -> set[str] | None:
    """The error signatures of failing results; None when one of them has no error text
    (nothing to tell two failures apart by)."""
    texts = [culprit_of(r) for r in results]
    if not texts or not all(t.strip() for t in texts):
        return None
    return {signature(t) for t in texts}


def _order_dependent_against_base(
    order: _OrderDependent, base_state: State | None, baseline_note: str
) -> Decision:
    """An order-dependent failure is a failure: new unless the base fails (or has none)."""
    reason, found = order
    if base_state is None or base_state == "skip":
        note = baseline_note or "no result at the base to compare with"
        return Decision("no_baseline", f"{reason}; {note}", order_dependence=found)
    if base_state == "fail":
        return Decision("broken_at_base", f"{reason}; fails at base too", order_dependence=found)
    if base_state == "mixed":
        why = f"{reason}; passed and failed at base too"
        return Decision("broken_at_base", why, order_dependence=found)
    return Decision("new_failure", reason, order_dependence=found)


def arrival_runs(results: Sequence[ResultView]) -> ArrivalRuns | None:
    """What the runs among `results` showed of a config the runner ran as new (some of them
    arrival runs); None when none is one."""
    ran = [r for r in results if r.outcome not in NOT_RUN_OUTCOMES]
    if not any(r.arrival for r in ran):
        return None
    failed = sum(r.outcome in FAILING_OUTCOMES for r in ran)
    return ArrivalRuns(failed=failed, runs=len(ran))


def _flaky_at_arrival(
    arrival: ArrivalRuns,
    ran: Sequence[ResultView],
    base_state: State | None,
    known: FlakinessAssessment | None,
) -> Decision:
    """A config the runner ran as new that passed and failed at head (a failed arrival run
    after a first pass, or a first failure that a rerun passed): FLAKY ON ARRIVAL (it gates: a
    flaky config is being added, or the PR makes one flaky), unless what came before the PR
    already shows it flaky (the base failed it, or its trusted history labels it flaky) or
    every failure is an infrastructure fault's."""
    shown = f"passed and failed at the head commit itself ({arrival.text()})"
    failing = [r for r in ran if r.outcome in FAILING_OUTCOMES]
    rules = [infra_signature(r.outcome, (culprit_of(r),)) for r in failing]
    if not failing or all(rules):
        return Decision("flaky", shown, arrival=arrival)
    if base_state in ("fail", "mixed"):
        why = f"{shown}; it fails at the base too, so it was flaky before this PR"
        return Decision("flaky", why, arrival=arrival)
    exists = base_state is not None and base_state != "skip"
    if exists and known is not None and known.flaky:
        why = f"{shown}; known flaky on the base branch before this PR: {known.reason}"
        return Decision("flaky", why, arrival=arrival)
    if exists:
        before = f" ({known.reason})" if known is not None else ""
        what = f"it passes at the base and was not flaky there{before}: this PR makes it flaky"
    else:
        what = "it is new to the base branch: a flaky config is being added"
    return Decision("flaky_on_arrival", f"{shown}; {what}", arrival=arrival)


#: The runner's `stop_reason` when its chance test decided a failure (`cpci.evidence.reruns`).
_DECIDED = re.compile(r"^decided after (\d+) attempt")


def decided_after(results: Sequence[ResultView]) -> int | None:
    """The attempt after which the runner's chance test called the failure decided and stopped
    rerunning it (its final record's `stop_reason`); None when the reruns stopped otherwise."""
    found = [
        int(m.group(1)) for r in results if r.stop_reason and (m := _DECIDED.match(r.stop_reason))
    ]
    return max(found) if found else None


def quarantined(decision: Decision, held: QuarantineState) -> Decision:
    """A quarantined config's decision: listed apart and never gating, whatever it did at head,
    with who quarantined it, why and since when, and what it would be without the quarantine."""
    since = f"{held.since:%Y-%m-%d}"
    what = info(decision.verdict).label
    why = f"quarantined by {held.by} since {since} ({_clip(held.reason, 200)}); at head: {what}"
    if decision.verdict not in ("passed", "skipped"):
        why += f" ({decision.reason})"
    return replace(
        decision, verdict="quarantined", reason=why, quarantine=held, would_be=decision.verdict
    )


def _flake_test(
    failing: Sequence[ResultView],
    base: Sequence[ResultView] | None,
    known: FlakinessAssessment | None,
    policy: EvidencePolicy,
) -> FlakeTest | None:
    """The chance test, on the config's trusted history when it is labelled flaky, else on the
    base results when the base itself passed and failed; None when nothing says flaky."""
    if known is not None and known.flaky and known.record.trials:
        record = known.record
    elif base and state_of(base) == "mixed" and (known is None or not known.flaky):
        ran = [r for r in base if r.outcome not in NOT_RUN_OUTCOMES]  # the rest say nothing
        bad = sum(r.flaky or r.outcome in FAILING_OUTCOMES for r in ran)
        record = FlakeRecord(failures=bad, trials=len(ran) + sum(r.flaky for r in ran))
    else:
        return None
    texts = (culprit_of(r) for r in failing)
    signatures = [signature(t) for t in texts if t.strip()]  # no message: nothing to compare
    return flake_test(record, len(failing), signatures, policy)


#: An order-dependent failure's reason, and the polluter its bisection found (None: none ran).
_OrderDependent = tuple[str, OrderDependence | None]


def _order_dependent(results: Sequence[ResultView]) -> _OrderDependent | None:
    """ "order-dependent: fails after X; found in 7 replays among 64 predecessors; passes
    alone" where the runner bisected its predecessors, else the predecessors its note names
    ("fails after X, Y"), if a result says it is order-dependent."""
    marked = [r for r in results if r.isolation == ORDER_DEPENDENT]
    if not marked:
        return None
    found = next((r.order_dependence for r in results if r.order_dependence), None)
    if found is not None:
        return f"order-dependent: {_clip(found.text())}; passes alone", found
    texts = [t for r in marked for t in (*r.messages, r.culprit)]
    for match in (p.search(t) for p in _PREDECESSORS for t in texts):
        if match:
            names = _clip(match.group(1).strip())
            return f"order-dependent: fails after {names}; passes alone", None
    return "order-dependent: fails after the configs that ran before it; passes alone", None


def _not_run(head: Sequence[ResultView]) -> Decision:
    """INFRA for a config that never ran: nothing says the code under test is at fault."""
    never = [r for r in head if r.outcome in NOT_RUN_OUTCOMES]
    texts = [t for r in never for t in (*r.messages, r.culprit) if t.strip()]
    why = next((t for t in texts if t.lower().startswith("not run")), texts[0] if texts else "")
    why = first_line(why, limit=None) or "no reason given"
    why = _clip(re.sub(r"^not run:\s*", "", why, flags=re.IGNORECASE))
    return Decision("infra", f"not run: {why}", "not-run")


def _clip(text: str, limit: int = REASON_PART) -> str:
    """Text from an upload, cut to fit a reason (a world of 200 predecessors names them all)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
