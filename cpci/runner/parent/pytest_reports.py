"""The pytest reports the parent shows for a config: its phases, duration and failure text.

Each config is reported to pytest as its own test with its own phases, duration and failure
text, so the terminal summary, `-rA`, `--junitxml` and `--lf` behave as for any test.
"""

from __future__ import annotations

import os
import time
from typing import Literal

import pytest

from cpci.runner.parent.attempt_records import AttemptRecord
from cpci.runner.wire.rank_errors import error_line, ranks_text
from cpci.schema import FAILING_OUTCOMES, Outcome, ResultRecord

FLAKY_ATTR = "cpci_flaky"


def item_reports(item: pytest.Item, final: AttemptRecord) -> list[pytest.TestReport]:
    """The setup/call/teardown reports for one config, from what its ranks reported."""
    record = final.result
    if final.reports:
        hook = item.config.hook
        reports: list[pytest.TestReport] = [
            hook.pytest_report_from_serializable(config=item.config, data=data)
            for data in final.reports
        ]
        for report in reports:
            if isinstance(report.longrepr, list):  # a skip's (path, line, reason), via JSON
                report.longrepr = tuple(report.longrepr)
        failing = [r for r in reports if r.failed]
        if failing and _told_by_cpci(record, failing[0]):
            failing[0].longrepr = _rank_text(record)
    else:
        reports = synthesized(item, record.outcome, _rank_text(record), record.duration_s)
    failing = [r for r in reports if r.failed]
    ranks = sorted({e.rank for e in record.rank_errors if e.rank >= 0})
    if record.outcome in FAILING_OUTCOMES or record.isolation or record.flaky:
        where = (
            f"group {record.batch.index} (world {record.batch.world}, {record.batch.size} configs)"
            if record.batch
            else "no world"
        )
        on = f" on {ranks_text(ranks)}" if ranks else ""
        info = (
            f"outcome {record.outcome}{on} (world size {record.world_size}), {where}, "
            f"attempt {record.attempt}"
        )
        if record.metrics_partial:
            info += (
                f"\nmetrics partial: {ranks_text(record.metrics_partial)} failed before recording "
                f"them; {', '.join(f'{n}={v:g}' for n, v in record.metrics.items())} is the max "
                "over the other ranks only"
            )
        if final.note:
            info += f"\n{final.note}"
        target = failing[0] if failing else reports[-1]
        target.sections.append(("cpci", info))
    if record.flaky:
        for report in reports:
            if report.when == "call":
                setattr(report, FLAKY_ATTR, True)
    return reports


def synthesized(
    item: pytest.Item, outcome: Outcome, text: str, duration: float
) -> list[pytest.TestReport]:
    """Reports for a config no rank reported on: it crashed, hung, never ran or was not planned.

    A config that could not be planned or never ran is an error (red, but not a test failure):
    nothing of its code ran.
    """
    if outcome in ("error", "not_run"):
        return [
            _phase_report(item, "setup", "failed", text, duration),
            _phase_report(item, "teardown", "passed", None, 0.0),
        ]
    return [
        _phase_report(item, "setup", "passed", None, 0.0),
        _phase_report(item, "call", "failed", f"[{outcome.upper()}] {text}", duration),
        _phase_report(item, "teardown", "passed", None, 0.0),
    ]


def skipped_reports(item: pytest.Item, reason: str) -> list[pytest.TestReport]:
    """The reports pytest itself gives a test skipped by its marks, for one skipped in the parent.

    The skip points at the test (path and 1-based line), as pytest's skip marks do, so `-rs`
    lists it under the test's own location.
    """
    path, line = item.reportinfo()[:2]
    where = (os.fspath(path), (line or 0) + 1, f"Skipped: {reason}")
    return [
        _phase_report(item, "setup", "skipped", where, 0.0),
        _phase_report(item, "teardown", "passed", None, 0.0),
    ]


def _phase_report(
    item: pytest.Item,
    when: Literal["setup", "call", "teardown"],
    result: Literal["passed", "failed", "skipped"],
    longrepr: str | tuple[str, int, str] | None,
    seconds: float,
) -> pytest.TestReport:
    now = time.time()
    return pytest.TestReport(
        item.nodeid,
        item.location,
        dict.fromkeys(item.keywords, 1),
        result,
        longrepr,
        when,
        duration=seconds,
        start=now - seconds,
        stop=now,
    )


def _told_by_cpci(record: ResultRecord, shown: pytest.TestReport) -> bool:
    """Whether cpci's account of a failure says more than the shown rank's own report: several
    ranks failed, or the rank leading `rank_errors` is not the one shown, or cpci told its error
    in other words (a peer's leaving explained)."""
    if not record.rank_errors:
        return False
    lead = record.rank_errors[0]
    ranks = {e.rank for e in record.rank_errors}
    return len(ranks) > 1 or lead.message != error_line(shown.longreprtext)


def _rank_text(record: ResultRecord) -> str:
    """A headline (what each rank saw, one line) and then every rank's full text."""
    headline = "; ".join(dict.fromkeys(e.message for e in record.rank_errors))
    parts = [headline] if headline else []
    for error in record.rank_errors:
        who = "world" if error.rank < 0 else f"rank {error.rank}"
        parts.append(
            f"---------- {who} ({error.phase}) ----------\n{error.detail or error.message}"
        )
    return "\n".join(parts) or record.outcome
