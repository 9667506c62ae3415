"""The PR report, built from already-loaded data by pure functions (no database here)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness
from cpci.server.analysis.observations import Observation
from cpci.server.analysis.shifts import (
    DURATION_POLICY,
    METRIC_POLICY,
    Shift,
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
from cpci.server.reports import (
    ATTENTION,
    BaselineInfo,
    ConfigVerdict,
    PullRequestReport,
    ReportCounts,
    RunRef,
    ShardProgress,
    ShiftFinding,
)


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report reads. Keys of the dicts are config database ids."""

    repository: str
    pull_request: int
    head_commit: str
    head_runs: Sequence[RunRef]
    shards: ShardProgress
    baseline: BaselineInfo
    configs: Mapping[int, str]
    head: Mapping[int, Sequence[ResultView]]
    base: Mapping[int, Sequence[ResultView]] | None
    histories: Mapping[int, Sequence[Observation]]
    base_samples: Mapping[int, Sequence[float]]  # passing durations on recent base-branch runs
    history_url: Callable[[str], str]


def needs_history(results: Sequence[ResultView]) -> bool:
    """Only failing configs need their flakiness assessed; the loader asks this first."""
    return any(r.outcome in FAILING_OUTCOMES for r in results)


def build_report(inputs: ReportInputs, policy: FlakinessPolicy) -> PullRequestReport:
    sections: dict[str, list[ConfigVerdict]] = {name: [] for name in ATTENTION}
    tally: Counter[str] = Counter()
    pending = not inputs.shards.complete
    no_baseline_note = inputs.baseline.note
    for pk in sorted(inputs.head, key=lambda pk: inputs.configs[pk]):
        head = inputs.head[pk]
        base = inputs.base.get(pk) if inputs.base is not None else None
        key = inputs.configs[pk]
        if pending:
            verdict, reason, rule, known = "pending", inputs.shards.text, None, None
        else:
            history = inputs.histories.get(pk)
            known = assess_flakiness(history, policy) if history is not None else None
            decision = decide(head, base, known, no_baseline_note)
            verdict, reason, rule = decision.verdict, decision.reason, decision.infra_rule
        tally[verdict] += 1
        if verdict in sections:
            sections[verdict].append(
                ConfigVerdict(
                    config=key,
                    config_pk=pk,
                    history_url=inputs.history_url(key),
                    verdict=verdict,  # type: ignore[arg-type]
                    reason=reason,
                    head_outcome=headline(head),
                    base_outcome=headline(base) if base else None,
                    message=first_message(head) if state_of(head) != "pass" else None,
                    ranks=failing_ranks(head) if state_of(head) != "pass" else [],
                    infra_rule=rule,
                    flakiness=known,
                )
            )
    durations, drift = ([], []) if pending else _shifts(inputs)
    counts = ReportCounts(
        configs=len(inputs.head),
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
        new_failures=sections["new_failure"],
        broken_at_base=sections["broken_at_base"],
        flaky=sections["flaky"],
        infra=sections["infra"],
        fixed=sections["fixed"],
        no_baseline=sections["no_baseline"],
        pending=sections["pending"],
        duration_regressions=durations,
        metric_drift=drift,
    )


def _shifts(inputs: ReportInputs) -> tuple[list[ShiftFinding], list[ShiftFinding]]:
    # Runs once per config of the PR (tens of thousands): kept to plain loops.
    durations: list[ShiftFinding] = []
    drift: list[ShiftFinding] = []
    base = inputs.base or {}
    for pk, head in inputs.head.items():
        head_ok = [r for r in head if r.outcome == "passed"]
        if not head_ok:
            continue
        value = median([r.duration_s for r in head_ok])
        shift = robust_shift("duration_s", inputs.base_samples.get(pk, ()), value, DURATION_POLICY)
        if shift is not None:
            durations.append(_finding(inputs, pk, shift))
        names = head_ok[0].metrics.keys() if len(head_ok) == 1 else {
            m for r in head_ok for m in r.metrics
        }  # fmt: skip
        if not names:
            continue
        base_run = [r for r in base.get(pk, ()) if r.outcome == "passed"]
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
    labels = {
        "new_failure": "new failure(s)", "broken_at_base": "broken at base", "flaky": "flaky",
        "infra": "infra", "fixed": "fixed", "no_baseline": "without baseline",
    }  # fmt: skip
    parts = [
        f"{counts.by_verdict[v]} {label}" for v, label in labels.items() if v in counts.by_verdict
    ]
    verdict = ", ".join(parts) if parts else "all passed"
    return f"{verdict}; {scope}; baseline: {inputs.baseline.note}"
