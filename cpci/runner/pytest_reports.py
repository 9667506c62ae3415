"""The pytest reports the parent shows for a config: its phases, duration and failure text.

Each config is reported to pytest as its own test with its own phases, duration and failure
text, so the terminal summary, `-rA`, `--junitxml` and `--lf` behave as for any test.
"""

from __future__ import annotations

import time
from typing import Literal

import pytest

from cpci.runner.delivery import Delivery
from cpci.schema import FAILING_OUTCOMES, Outcome, ResultRecord

FLAKY_ATTR = "cpci_flaky"


def item_reports(item: pytest.Item, delivery: Delivery) -> list[pytest.TestReport]:
    """The setup/call/teardown reports for one config, from what its ranks reported."""
    record = delivery.record
    if delivery.reports:
        hook = item.config.hook
        reports: list[pytest.TestReport] = [
            hook.pytest_report_from_serializable(config=item.config, data=data)
            for data in delivery.reports
        ]
        for report in reports:
            if isinstance(report.longrepr, list):  # a skip's (path, line, reason), via JSON
                report.longrepr = tuple(report.longrepr)
        failing = [r for r in reports if r.failed]
        if failing and len({e.rank for e in record.rank_errors}) > 1:
            failing[0].longrepr = _rank_text(record)
    else:
        reports = synthesized(item, record.outcome, _rank_text(record), record.duration_s)
    failing = [r for r in reports if r.failed]
    ranks = sorted({e.rank for e in record.rank_errors if e.rank >= 0})
    if record.outcome in FAILING_OUTCOMES or record.isolation or record.flaky:
        where = (
            f"batch {record.batch.index} (world {record.batch.world}, {record.batch.size} configs)"
            if record.batch
            else "no world"
        )
        info = (
            f"outcome {record.outcome} on {record.world_size} ranks, {where}, "
            f"attempt {record.attempt}"
        )
        if ranks:
            info += f"; failing ranks: {', '.join(map(str, ranks))}"
        if delivery.note:
            info += f"\n{delivery.note}"
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
    now = time.time()

    def phase_report(
        when: Literal["setup", "call", "teardown"],
        result: Literal["passed", "failed"],
        longrepr: str | None,
        seconds: float,
    ) -> pytest.TestReport:
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

    if outcome in ("error", "not_run"):
        return [
            phase_report("setup", "failed", text, duration),
            phase_report("teardown", "passed", None, 0.0),
        ]
    return [
        phase_report("setup", "passed", None, 0.0),
        phase_report("call", "failed", f"[{outcome.upper()}] {text}", duration),
        phase_report("teardown", "passed", None, 0.0),
    ]


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
