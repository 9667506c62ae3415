"""The PR report, built from already-loaded data by pure functions (no database here).

Results are keyed by config *and* CI matrix leg: a config run on an H100 leg and an A100 leg is
judged twice, each leg against the base's same leg ("N configs, M runs" counts both)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from cpci.schema import (
    ATTENTION,
    FAILING_OUTCOMES,
    VERDICTS,
    BaselineInfo,
    ConfigVerdict,
    FlakinessAssessment,
    PullRequestReport,
    ReportCounts,
    RunRef,
    ShardProgress,
    Shift,
    ShiftFinding,
)
from cpci.schema.verdicts import count_text
from cpci.server.analysis.evidence import EvidencePolicy
from cpci.server.analysis.flakiness import (
    FlakinessPolicy,
    assess_flakiness,
)
from cpci.server.analysis.observations import Observation
from cpci.server.analysis.shifts import (
    DURATION_POLICY,
    METRIC_POLICY,
    median,
    robust_shift,
)
from cpci.server.analysis.verdicts import (
    ResultView,
    decide,
    failing_ranks,
    first_message,
    headline,
    state_of,
)


class ConfigLeg(NamedTuple):
    """A config on one CI matrix leg ("" for a run without a matrix)."""

    pk: int
    leg: str = ""


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads. Results are keyed by config database id and leg; the
    other dicts by config database id."""

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


def needs_history(results: Sequence[ResultView]) -> bool:
    """Only failing configs need their flakiness assessed; the loader asks this first."""
    return any(r.outcome in FAILING_OUTCOMES for r in results)


def build_report(
    inputs: ReportInputs, policy: FlakinessPolicy, evidence: EvidencePolicy
) -> PullRequestReport:
    sections: dict[str, list[ConfigVerdict]] = {name: [] for name in ATTENTION}
    tally: Counter[str] = Counter()
    pending = not inputs.shards.complete
    no_baseline_note = inputs.baseline.note
    legs = {key.leg for key in inputs.head}
    known_by_pk: dict[int, FlakinessAssessment] = {}  # a config on several legs: assess once
    histories, base_map = inputs.histories, inputs.base
    for at in sorted(inputs.head, key=lambda at: (inputs.configs[at.pk], at.leg)):
        head = inputs.head[at]
        base = _base_of(base_map, at) if base_map is not None else None
        key = inputs.configs[at.pk]
        test = None
        if pending:
            verdict, reason, rule, known = "pending", inputs.shards.text, None, None
        else:
            history = histories.get(at.pk)  # loaded for failing configs only
            known = None
            if history:
                known = known_by_pk.get(at.pk)
                if known is None:
                    known = known_by_pk[at.pk] = assess_flakiness(history, policy)
            decision = decide(head, base, known, no_baseline_note, evidence)
            verdict, reason, rule = decision.verdict, decision.reason, decision.infra_rule
            test = decision.evidence
        tally[verdict] += 1
        if verdict in sections:
            sections[verdict].append(
                ConfigVerdict(
                    config=key,
                    config_pk=at.pk,
                    history_url=inputs.history_url(key),
                    verdict=verdict,  # type: ignore[arg-type]
                    reason=reason,
                    head_outcome=headline(head),
                    base_outcome=headline(base) if base else None,
                    message=first_message(head) if state_of(head) != "pass" else None,
                    ranks=failing_ranks(head) if state_of(head) != "pass" else [],
                    infra_rule=rule,
                    flakiness=known,
                    evidence=test,
                    leg=at.leg if len(legs) > 1 else "",
                )
            )
    durations, drift = ([], []) if pending else _shifts(inputs)
    counts = ReportCounts(
        configs=len({at.pk for at in inputs.head}),
        results=sum(len(v) for v in inputs.head.values()),
        by_verdict=dict(sorted(tally.items())),
    )
    return PullRequestReport(
        repository=inputs.repository,
        pull_request=inputs.pull_request,
        head_commit=inputs.head_commit,
        status="pending" if pending else "complete",
        summary=_summary(counts, inputs, pending),
        head_runs=list(inputs.head_runs),
        shards=inputs.shards,
        baseline=inputs.baseline,
        counts=counts,
        duration_regressions=durations,
        metric_drift=drift,
        **{v.field: sections[v.name] for v in VERDICTS if v.name in sections},
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
        names = head_ok[0].metrics.keys() if len(head_ok) == 1 else {
            m for r in head_ok for m in r.metrics
        }  # fmt: skip
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


def _summary(counts: ReportCounts, inputs: ReportInputs, pending: bool) -> str:
    scope = f"{counts.configs} configs ({counts.results} results)"
    if pending:
        return f"pending: {inputs.shards.text}; no verdict until every shard is in ({scope} so far)"
    verdict = count_text(counts.by_verdict) or "all passed"
    if counts.by_verdict.get("fixed"):
        verdict += f", {counts.by_verdict['fixed']} fixed"
    return f"{verdict}; {scope}; baseline: {inputs.baseline.note}"
