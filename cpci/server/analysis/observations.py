"""What the analysis reads: stored results reduced to the fields verdicts depend on."""

from __future__ import annotations

from dataclasses import dataclass

from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, RunLink

#: Outcomes that count as a pass (an expected failure is the config behaving as intended).
PASSING_OUTCOMES: frozenset[str] = frozenset({"passed", "xfailed", "xpassed"})


@dataclass(frozen=True)
class Observation:
    """One stored result of one config, oldest-first order is the caller's job."""

    run: RunLink
    run_id: int
    environment_id: int
    outcome: str
    flaky: bool = False  # the runner saw it fail, then pass on a rerun
    on_pull_request: bool = False
    signature: str = ""  # of the first failing rank's error, for failures

    @property
    def failed(self) -> bool:
        """A failure of the code: a config that never ran (`not_run`) did not fail."""
        return self.outcome in FAILING_OUTCOMES and self.outcome not in NOT_RUN_OUTCOMES

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING_OUTCOMES

    @property
    def counted(self) -> bool:
        """Skips and never-ran configs say nothing about whether the config works."""
        return self.failed or self.passed
