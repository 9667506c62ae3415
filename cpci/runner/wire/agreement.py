"""From pytest phase reports to one outcome per rank, and from the ranks to one agreed record.

Pure functions over the protocol's records, shared by the ranks (each computes its local outcome)
and rank 0 (which merges the payloads the control plane collects, `cpci.runner.rank.control_plane`):
a failure on any rank fails the config, and every failing rank's errors are kept; a failing rank
that recorded none of a metric the others recorded marks the config's metrics partial.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cpci.runner.wire.protocol import SEVERITY, AgreedRecord, LocalOutcome, RankPayload
from cpci.schema import FAILING_OUTCOMES


def local_outcome(reports: Sequence[Any]) -> LocalOutcome:
    """pytest's outcome for one item on one rank, from its setup/call/teardown reports."""
    outcome: LocalOutcome = "passed"
    for report in reports:
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            return "error" if report.when in ("setup", "teardown") else "failed"
        if report.skipped:
            outcome = "xfailed" if xfail else "skipped"
        elif report.when == "call":
            outcome = "xpassed" if xfail else "passed"
    return outcome


def merge(outcomes: Sequence[LocalOutcome]) -> LocalOutcome:
    """The agreed outcome of a config from each rank's local outcome: the most severe."""
    return min(outcomes, key=SEVERITY.index)


def agreed_record(
    index: int,
    payloads: Sequence[RankPayload],
    *,
    duration_s: float,
) -> AgreedRecord:
    """The record rank 0 writes for config `index` from every rank's payload (rank order)."""
    assert [p.rank for p in payloads] == list(range(len(payloads))), "payloads out of rank order"
    merged = merge([p.outcome for p in payloads])
    # Reports shown to the user: those of the first rank (rank 0 if it can) with that outcome.
    shown = next(p for p in payloads if p.outcome == merged)
    metrics: dict[str, float] = {}
    for payload in payloads:
        for name, value in payload.metrics.items():
            metrics[name] = max(value, metrics.get(name, value))
    # A rank that failed before recording a metric the others recorded: the max is theirs only.
    partial = [
        p.rank
        for p in payloads
        if p.outcome in FAILING_OUTCOMES and not metrics.keys() <= p.metrics.keys()
    ]
    return AgreedRecord(
        index=index,
        outcome=merged,
        duration_s=duration_s,
        rank_errors=[e for p in payloads for e in p.errors],
        reports=shown.reports,
        report_rank=shown.rank,
        metrics=metrics,
        metrics_partial=partial,
    )
