"""When a failed config is run again: the reruns and failure isolation the user asked for.

`--cpci-reruns N` reruns a config that failed (failed, error, crashed, timeout) alone, up to N
times; `--cpci-isolate-failures` runs a config that failed in a shared world alone at least once.
A config that never ran (`not_run`) is never rerun: its world did not start, which says nothing
about its code. What the attempts then mean is `cpci.runner.parent.attempts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, ResultRecord

#: Outcomes worth a rerun: failures of a config that ran.
RERUN_OUTCOMES = FAILING_OUTCOMES - NOT_RUN_OUTCOMES


@dataclass(frozen=True)
class RerunPolicy:
    """How hard the runner tries before it calls a failure a failure."""

    reruns: int = 0
    isolate: bool = False

    def alone_runs(self, shared: bool) -> int:
        """Alone runs a failing config gets: the reruns, and at least one to isolate it."""
        return max(self.reruns, 1 if self.isolate and shared else 0)

    def wants_rerun(self, record: ResultRecord, shared: bool) -> bool:
        """Whether this attempt (in a shared world or alone) is followed by reruns."""
        return record.outcome in RERUN_OUTCOMES and self.alone_runs(shared) > 0
