"""From pytest phase reports to one outcome per rank, and from ranks to one agreed outcome.

Pure functions over plain data, shared by the ranks (which compute their local outcome) and
rank 0 (which merges them): a failure on any rank fails the config, and every failing rank's
text is kept.
"""

from __future__ import annotations

from typing import Any

#: Most severe first; the merged outcome is the most severe local one.
SEVERITY = ("error", "failed", "xpassed", "passed", "xfailed", "skipped")
FAILING = frozenset({"error", "failed"})


def local_outcome(reports: list[Any]) -> str:
    """pytest's outcome for one item on one rank, from its setup/call/teardown reports."""
    outcome = "passed"
    for report in reports:
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            return "error" if report.when in ("setup", "teardown") else "failed"
        if report.skipped:
            outcome = "xfailed" if xfail else "skipped"
        elif report.when == "call":
            outcome = "xpassed" if xfail else "passed"
    return outcome


def merge(outcomes: list[str]) -> str:
    """The agreed outcome of a config from each rank's local outcome."""
    return min(outcomes, key=SEVERITY.index)


def first_line(text: str) -> str:
    """The line a table shows for a failure: the first `E   ` line, else the last non-empty one."""
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    if errors:
        return errors[0][:2000]
    return (lines[-1].strip() if lines else "")[:2000]
