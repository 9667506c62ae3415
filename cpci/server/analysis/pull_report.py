"""The PR report, built from already-loaded data by pure functions (no database here).

Results are keyed by config *and* CI matrix leg: a config run on an H100 leg and an A100 leg is
judged twice, each leg against the base's same leg ("N configs, M runs" counts both)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple, TypeVar

from cpci.evidence import EvidencePolicy
from cpci.schema import (
    ATTENTION,
    FAILING_OUTCOMES,
    VERDICTS,
    BaselineInfo,
    ConfigVerdict,
    FlakinessAssessment,
    PullRequestReport,
    QuarantineState,
    ReportCounts,
    ReportSectionName,
    ReportSectionPage,
    RunRef,
    ShardProgress,
    Shift,
    ShiftFinding,
    Storm,
)
from cpci.schema.pull_report import SHIFT_SECTIONS
from cpci.schema.verdicts import count_text
from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness, base_evidence
from cpci.server.analysis.observations import Observation
from cpci.server.analysis.shifts import (
    DURATION_POLICY,
    METRIC_POLICY,
    median,
    robust_shift,
)
from cpci.server.analysis.storms import NO_STORMS, StormPolicy, Storms, find_storms
from cpci.server.analysis.verdicts import (
    Decision,
    ResultView,
    decide,
    decided_after,
    failing_ranks,
    first_message,
    headline,
    quarantined,
    state_of,
)


class ConfigLeg(NamedTuple):
    """A config on one CI matrix leg ("" for a run without a matrix)."""

    pk: int
    leg: str = ""


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads. Results are keyed by config database id and leg; the
    other dicts by config database id. `shard_of` places each head config on its shard index,
    for storms (a config with no place is in none); `quarantined` holds the repository's open
    quarantines by config key (such a config is listed apart and never gates)."""

    repository: str
    pull_request: int
    head_commit: str
    head_runs: Sequence[RunRef]
    shards: ShardProgress
    baseline: BaselineInfo
    configs: Mapping[int, str]
    head: Mapping[ConfigLeg, Sequence[ResultView]]
    base: Mapping[ConfigLeg, Sequence[ResultView]] | None
    histories: Mapping[int, Sequence[Observation]]
    base_samples: Mapping[ConfigLeg, Sequence[float]]  # passing durations, recent branch runs
    history_url: Callable[[str], str]
    shard_of: Mapping[ConfigLeg, int] = field(default_factory=dict)
    base_runs: frozenset[int] = frozenset()  # the baseline run's stored ids (its attempts)
    storms: Storms | None = None  # found by the loader already (None: find them here)
    order: Sequence[ConfigLeg] | None = None  # `report_order(head, configs)`, if the loader has it
    quarantined: Mapping[str, QuarantineState] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportPolicy:
    """How a report judges and how much it lists: `section_cap` items per section at most."""

    flakiness: FlakinessPolicy
    evidence: EvidencePolicy
    storms: StormPolicy = field(default_factory=StormPolicy)
    section_cap: int = 200

    def __post_init__(self) -> None:
        if self.section_cap < 1:
            raise ValueError(f"section_cap must be >= 1, got {self.section_cap}")


def needs_history(results: Sequence[ResultView]) -> bool:
    """Only failing configs need their flakiness assessed; the loader asks this first."""
    return any(r.outcome in FAILING_OUTCOMES for r in results)


def report_order(head: Mapping[ConfigLeg, object], configs: Mapping[int, str]) -> list[ConfigLeg]:
    """The head's configs in the order every section lists them: by config key, then leg
    (sorting 80,000 keys is a tenth of a second: a loader that keeps the head keeps this too).
    Two stable sorts on plain strings, legs then keys, rather than one on (key, leg) tuples:
    strings compare on CPython's fast path (a config key names one config of the repository)."""
    by_leg = sorted(head, key=attrgetter("leg"))
    return sorted(by_leg, key=lambda at: configs[at.pk])


def storms_of(
    head: Mapping[ConfigLeg, Sequence[ResultView]],
    shard_of: Mapping[ConfigLeg, int],
    policy: StormPolicy,
) -> Storms:
    """The head's storms, `shard_of` placing each config on its shard index (the loader asks
    first: a storm's infra configs need no history)."""
    legs = {at: (shard, at.leg) for at, shard in shard_of.items()}
    return find_storms(head, legs, policy)


class _Row(NamedTuple):
    """One config's verdict before it becomes a `ConfigVerdict` (only the listed ones do)."""

    at: ConfigLeg
    key: str
    decision: Decision
    known: FlakinessAssessment | None


#: A config's decision and the flakiness it was weighed against (None when not looked up).
_Decided = tuple[Decision, FlakinessAssessment | None]


@dataclass(frozen=True)
class _Judged:
    """Every config's decision; a section holds its configs in report order, and only the
    listed ones become rows (a storm report has tens of thousands in one section)."""

    sections: dict[str, list[ConfigLeg]]
    decided: dict[ConfigLeg, _Decided]
    tally: Counter[str]
    storms: Storms
    legs: int

    def rows(self, verdict: str, configs: Mapping[int, str], start: int, stop: int) -> list[_Row]:
        """The rows of one section from `start` to `stop` (in report order)."""
        return [
            _Row(at, configs[at.pk], *self.decided[at]) for at in self.sections[verdict][start:stop]
        ]


def build_report(inputs: ReportInputs, policy: ReportPolicy) -> PullRequestReport:
    """The report, each section cut to `policy.section_cap` items with its total kept."""
    judged = _judge(inputs, policy)
    cap = policy.section_cap
    pending = not inputs.shards.complete
    durations, drift = ([], []) if pending else _shifts(inputs)
    counts = ReportCounts(
        configs=len({at.pk for at in inputs.head}),
        results=sum(len(v) for v in inputs.head.values()),
        by_verdict=dict(sorted(judged.tally.items())),
    )
    sections = {
        v.field: [
            _verdict(inputs, row, judged.legs)
            for row in judged.rows(v.name, inputs.configs, 0, cap)
        ]
        for v in VERDICTS
        if v.name in judged.sections
    }
    totals = {v.field: len(judged.sections[v.name]) for v in VERDICTS if v.name in judged.sections}
    totals.update(duration_regressions=len(durations), metric_drift=len(drift))
    return PullRequestReport(
        repository=inputs.repository,
        pull_request=inputs.pull_request,
        head_commit=inputs.head_commit,
        status="pending" if pending else "complete",
        summary=_summary(counts, inputs, pending, judged.storms),
        head_runs=list(inputs.head_runs),
        shards=inputs.shards,
        baseline=inputs.baseline,
        counts=counts,
        duration_regressions=durations[:cap],
        metric_drift=drift[:cap],
        storms=judged.storms.found,
        section_cap=cap,
        section_totals=totals,
        **sections,
    )


def build_section(
    inputs: ReportInputs,
    policy: ReportPolicy,
    section: ReportSectionName,
    offset: int,
    limit: int,
) -> ReportSectionPage:
    """One page of one section, in the report's order (the report holds its first items)."""
    if section in SHIFT_SECTIONS:
        pending = not inputs.shards.complete
        durations, drift = ([], []) if pending else _shifts(inputs)
        found = durations if section == "duration_regressions" else drift
        total, verdicts, shifts = len(found), [], found[offset : offset + limit]
    else:
        judged = _judge(inputs, policy)
        verdict = _VERDICT_OF[section]
        total, shifts = len(judged.sections[verdict]), []
        rows = judged.rows(verdict, inputs.configs, offset, offset + limit)
        verdicts = [_verdict(inputs, r, judged.legs) for r in rows]
    return ReportSectionPage(
        repository=inputs.repository,
        pull_request=inputs.pull_request,
        head_commit=inputs.head_commit,
        section=section,
        total=total,
        offset=offset,
        limit=limit,
        next_offset=offset + limit if offset + limit < total else None,
        verdicts=verdicts,
        shifts=shifts,
    )


#: A section's field name -> its verdict.
_VERDICT_OF = {v.field: v.name for v in VERDICTS if v.field}


def _judge(inputs: ReportInputs, policy: ReportPolicy) -> _Judged:
    """Every config's verdict. Runs once per config of the PR (a storm has tens of thousands):
    a storm's configs share one decision, looked up, and nothing is built per config."""
    sections: dict[str, list[ConfigLeg]] = {name: [] for name in ATTENTION}
    decided: dict[ConfigLeg, _Decided] = {}
    tally: Counter[str] = Counter()
    pending = not inputs.shards.complete
    storms = inputs.storms
    if pending:
        storms = NO_STORMS
    elif storms is None:
        storms = storms_of(inputs.head, inputs.shard_of, policy.storms)
    no_baseline_note = inputs.baseline.note
    known_by_pk: dict[int, FlakinessAssessment] = {}  # a config on several legs: assess once
    histories, base_map = inputs.histories, inputs.base
    waiting: _Decided = (Decision("pending", inputs.shards.text), None)
    # One decision per storm of an infra signature, shared by its configs (by storm identity).
    by_storm = {id(s): (_storm_decision(s), None) for s in storms.found if s.infra_rule}
    caught = storms.of.get
    quarantines = inputs.quarantined
    order = inputs.order if inputs.order is not None else report_order(inputs.head, inputs.configs)
    for at in order:
        storm = caught(at)  # none while pending
        found = by_storm.get(id(storm)) if storm is not None else waiting if pending else None
        if found is None:
            known = None
            base = _base_of(base_map, at) if base_map is not None else None
            history = histories.get(at.pk)  # loaded for failing configs only
            if history:
                known = known_by_pk.get(at.pk)
                if known is None:
                    known = known_by_pk[at.pk] = assess_flakiness(history, policy.flakiness)
            evidence = None
            if history and base and inputs.base_runs and state_of(base) == "fail":
                evidence = base_evidence(history, inputs.base_runs, policy.flakiness)
            decision = decide(
                inputs.head[at], base, known, no_baseline_note, policy.evidence, evidence
            )
            found = (decision, known)
        held = quarantines.get(inputs.configs[at.pk]) if quarantines and not pending else None
        if held is not None:
            found = (quarantined(found[0], held), found[1])
        decided[at] = found
        verdict = found[0].verdict
        tally[verdict] += 1
        if verdict in sections:
            sections[verdict].append(at)
    return _Judged(sections, decided, tally, storms, len({key.leg for key in inputs.head}))


def _storm_decision(storm: Storm) -> Decision:
    """INFRA for a config caught in a storm of an infra signature (see `analysis.storms`)."""
    reason = f"infra storm on {storm.text} failed with this signature: {storm.signature}"
    return Decision("infra", reason, storm.infra_rule)


def _verdict(inputs: ReportInputs, row: _Row, legs: int) -> ConfigVerdict:
    at, key, decision = row.at, row.key, row.decision
    head = inputs.head[at]
    base = _base_of(inputs.base, at) if inputs.base is not None else None
    failing = state_of(head) != "pass"
    return ConfigVerdict(
        config=key,
        config_pk=at.pk,
        history_url=inputs.history_url(key),
        verdict=decision.verdict,
        reason=decision.reason,
        head_outcome=headline(head),
        base_outcome=headline(base) if base else None,
        message=first_message(head) if failing else None,
        ranks=failing_ranks(head) if failing else [],
        infra_rule=decision.infra_rule,
        flakiness=row.known,
        evidence=decision.evidence,
        leg=at.leg if legs > 1 else "",
        attempts=len(head),
        decided_after=decided_after(head) if failing else None,
        arrival=decision.arrival,
        order_dependence=decision.order_dependence,
        quarantine=decision.quarantine,
        would_be=decision.would_be,
    )


T = TypeVar("T")


def _base_of(base: Mapping[ConfigLeg, T], at: ConfigLeg) -> T | None:
    """The base's value on the same leg; a base run without a matrix stands for every leg."""
    found = base.get(at)
    if found is None and at.leg:
        return base.get(ConfigLeg(at.pk, ""))
    return found


def _shifts(inputs: ReportInputs) -> tuple[list[ShiftFinding], list[ShiftFinding]]:
    # Runs once per config of the PR (tens of thousands): kept to plain loops.
    durations: list[ShiftFinding] = []
    drift: list[ShiftFinding] = []
    base = inputs.base or {}
    for at, head in inputs.head.items():
        head_ok = [r for r in head if r.outcome == "passed"]
        if not head_ok:
            continue
        pk = at.pk
        value = median([r.duration_s for r in head_ok])
        samples = _base_of(inputs.base_samples, at) or ()
        shift = robust_shift("duration_s", samples, value, DURATION_POLICY)
        if shift is not None:
            durations.append(_finding(inputs, pk, shift))
        names = (
            head_ok[0].metrics.keys()
            if len(head_ok) == 1
            else {m for r in head_ok for m in r.metrics}
        )
        if not names:
            continue
        base_run = [r for r in _base_of(base, at) or () if r.outcome == "passed"]
        for name in sorted(names):
            head_values = [r.metrics[name] for r in head_ok if name in r.metrics]
            base_values = [r.metrics[name] for r in base_run if name in r.metrics]
            metric = robust_shift(name, base_values, median(head_values), METRIC_POLICY)
            if metric is not None:
                drift.append(_finding(inputs, pk, metric))
    durations.sort(key=lambda f: -(f.shift.relative or 0))
    drift.sort(key=lambda f: (f.config, f.shift.name))
    return durations, drift


def _finding(inputs: ReportInputs, pk: int, shift: Shift) -> ShiftFinding:
    key = inputs.configs[pk]
    return ShiftFinding(config=key, config_pk=pk, history_url=inputs.history_url(key), shift=shift)


def _summary(counts: ReportCounts, inputs: ReportInputs, pending: bool, storms: Storms) -> str:
    scope = f"{counts.configs} configs ({counts.results} results)"
    if pending:
        return f"pending: {inputs.shards.text}; no verdict until every shard is in ({scope} so far)"
    verdict = count_text(counts.by_verdict) or "all passed"
    for name in ("fixed", "quarantined"):
        if counts.by_verdict.get(name):
            verdict += f", {counts.by_verdict[name]} {name}"
    storm = f"; storm on {len(storms.found)} shard(s)" if storms else ""
    return f"{verdict}; {scope}{storm}; baseline: {inputs.baseline.note}"
