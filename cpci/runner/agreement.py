"""From pytest phase reports to one outcome per rank, and from the ranks to one agreed record.

Pure functions over the protocol's records, shared by the ranks (each computes its local outcome)
and rank 0 (which merges the gathered payloads): a failure on any rank fails the config, and every
failing rank's errors are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cpci.runner.protocol import SEVERITY, AgreedRecord, LocalOutcome, RankPayload
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


def passed(outcome: LocalOutcome) -> bool:
    """Whether a rank's outcome lets the config pass (what the ranks all_reduce)."""
    return outcome not in FAILING_OUTCOMES


def merge(outcomes: Sequence[LocalOutcome]) -> LocalOutcome:
    """The agreed outcome of a config from each rank's local outcome: the most severe."""
    return min(outcomes, key=SEVERITY.index)


def agreed_record(
    index: int,
    payloads: Sequence[RankPayload],
    *,
    all_passed: bool,
    duration_s: float,
) -> AgreedRecord:
    """The record rank 0 writes for config `index` from every rank's payload (rank order).

    `all_passed` is the result of the ranks' all_reduce; it must agree with the payloads.
    """
    merged = merge([p.outcome for p in payloads])
    assert all_passed == passed(merged), "all_reduce and gathered outcomes disagree"
    # Reports shown to the user: those of the first rank (rank 0 if it can) with that outcome.
    shown = next(p for p in payloads if p.outcome == merged)
    metrics: dict[str, float] = {}
    for payload in payloads:
        for name, value in payload.metrics.items():
            metrics[name] = max(value, metrics.get(name, value))
    return AgreedRecord(
        index=index,
        outcome=merged,
        duration_s=duration_s,
        rank_errors=[e for p in payloads for e in p.errors],
        reports=shown.reports,
        report_rank=shown.rank,
        metrics=metrics,
    )
