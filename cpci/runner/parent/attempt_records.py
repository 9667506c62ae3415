"""One attempt of a config, on its way from the scheduler to pytest and the results file.

An `AttemptRecord` carries the attempt's results line (`result`, a `ResultRecord`) with what pytest
needs to show it: the serialized reports of the rank shown to users, and whether this attempt is
the config's final one. The functions below make the record for each way an attempt can end: its
ranks agreed on an outcome, its world crashed or hung while it ran, or it never began.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpci.runner.parent.planning import ConfigSpec
from cpci.runner.parent.world import WorldFailure
from cpci.runner.wire.protocol import AgreedRecord, SerializedReport
from cpci.runner.wire.rank_errors import world_note
from cpci.schema import BatchInfo, Outcome, RankError, ResultRecord


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of a config; the `final` one is what pytest reports (every attempt's `result`
    goes to the results file)."""

    spec: ConfigSpec
    result: ResultRecord
    reports: list[SerializedReport] | None  # None when no rank reported (crash, timeout, not run)
    final: bool
    note: str | None = None
    recorded: bool = False  # `result` is in the results file already: only report it


@dataclass(frozen=True)
class Where:
    """Which attempt of a config this is, and the group and world it ran in (or was meant to)."""

    attempt: int
    backend: str
    batch: BatchInfo | None  # None: no world was meant for it (the scheduler ended first)


def of_agreed(spec: ConfigSpec, agreed: AgreedRecord, where: Where) -> AttemptRecord:
    """An attempt whose ranks agreed on its outcome."""
    return _attempt(
        spec,
        where,
        outcome=agreed.outcome,
        duration_s=agreed.duration_s,
        rank_errors=agreed.rank_errors,
        metrics=agreed.metrics,
        metrics_partial=agreed.metrics_partial or None,
        reports=agreed.reports,
    )


def of_ended_world(spec: ConfigSpec, failure: WorldFailure, where: Where) -> AttemptRecord:
    """The attempt in flight when its world crashed, hung, or was ended after one rank failed a
    torch harness test: it ran, and it is to blame (its outcome is the failure's kind)."""
    return _attempt(
        spec, where, outcome=failure.kind, duration_s=failure.culprit_s, rank_errors=failure.errors
    )


def of_not_run(spec: ConfigSpec, why: str, detail: str, where: Where) -> AttemptRecord:
    """An attempt that never began: red, but no evidence about the config's code."""
    message = f"not run: {why}"
    note = world_note("world", message, f"{message}\n{detail}")
    return _attempt(spec, where, outcome="not_run", duration_s=0.0, rank_errors=[note])


def skipped_record(spec: ConfigSpec) -> ResultRecord:
    """A config the parent skipped before planning: a results line, as if its ranks skipped it."""
    return ResultRecord(
        nodeid=spec.nodeid,
        world_size=spec.world_size,
        backend=spec.backend,
        params=spec.params,
        outcome="skipped",
        duration_s=0.0,
    )


def _attempt(
    spec: ConfigSpec,
    where: Where,
    *,
    outcome: Outcome,
    duration_s: float,
    rank_errors: list[RankError],
    metrics: dict[str, float] | None = None,
    metrics_partial: list[int] | None = None,
    reports: list[SerializedReport] | None = None,
) -> AttemptRecord:
    result = ResultRecord(
        nodeid=spec.nodeid,
        world_size=spec.world_size,
        backend=where.backend,
        params=spec.params,
        outcome=outcome,
        duration_s=duration_s,
        rank_errors=rank_errors,
        attempt=where.attempt,
        metrics=metrics or {},
        metrics_partial=metrics_partial,
        batch=where.batch,
    )
    return AttemptRecord(spec, result, reports, final=False)
