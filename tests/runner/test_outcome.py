"""A config's outcome from its phase reports, and the agreement of its ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cpci.runner.outcome import first_line, local_outcome, merge


@dataclass
class Report:
    when: str
    outcome: str
    wasxfail: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    @property
    def skipped(self) -> bool:
        return self.outcome == "skipped"

    def __getattribute__(self, name: str) -> object:
        if name == "wasxfail" and object.__getattribute__(self, "wasxfail") is None:
            raise AttributeError(name)  # pytest sets wasxfail only on xfail reports
        return object.__getattribute__(self, name)


def phases(
    setup: str, call: str | None, teardown: str = "passed", xfail: bool = False
) -> list[Report]:
    reports = [Report("setup", setup)]
    if call is not None:
        reports.append(Report("call", call, "reason" if xfail else None))
    reports.append(Report("teardown", teardown))
    return reports


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        (phases("passed", "passed"), "passed"),
        (phases("passed", "failed"), "failed"),
        (phases("failed", None), "error"),
        (phases("passed", "passed", teardown="failed"), "error"),
        (phases("skipped", None), "skipped"),
        (phases("passed", "skipped"), "skipped"),
        (phases("passed", "skipped", xfail=True), "xfailed"),
        (phases("passed", "passed", xfail=True), "xpassed"),
    ],
)
def test_local_outcome(reports: list[Report], expected: str) -> None:
    assert local_outcome(reports) == expected


@pytest.mark.parametrize(
    ("ranks", "agreed"),
    [
        (["passed", "passed"], "passed"),
        (["passed", "failed"], "failed"),  # one failing rank fails the config
        (["failed", "error"], "error"),
        (["skipped", "passed"], "passed"),
        (["xfailed", "xfailed"], "xfailed"),
    ],
)
def test_merge_takes_the_most_severe(ranks: list[str], agreed: str) -> None:
    assert merge(ranks) == agreed


def test_first_line_prefers_the_first_error_line() -> None:
    text = (
        "def test():\n>   assert x == 1\nE   assert 2 == 1\nE    +  where 2 = f()\n"
        "\nfile.py:3: AssertionError"
    )
    assert first_line(text) == "assert 2 == 1"
    assert first_line("RuntimeError: boom\n") == "RuntimeError: boom"
    assert first_line("") == ""
