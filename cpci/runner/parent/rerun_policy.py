"""When a config is run again: the reruns, failure isolation and new configs' runs asked for.

`--cpci-reruns N` is the cap on a failure's reruns, each alone in a fresh world; which of them
are made is the evidence rule's (`cpci.evidence.decide_rerun`, `--cpci-reruns-policy`): fixed
reruns every failure to the cap, adaptive only while the config's base-branch record cannot yet
decide it. `--cpci-isolate-failures` runs a config that failed in a shared world alone at least
once, whatever the rule says (an order-dependent failure must not pass for the PR's).
`--cpci-new-config-runs K` runs a config new to the base branch K more times, alone, within a
share of the shard's time (`ArrivalBudget`). A config that never ran (`not_run`) is never rerun:
its world did not start, which says nothing about its code. What the attempts then mean is
`cpci.runner.parent.attempts`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cpci.evidence import RERUN_OUTCOMES, RerunDecision, RerunMode, RerunRule, decide_rerun
from cpci.runner.parent.evidence import RunEvidence
from cpci.schema import ResultRecord


class ArrivalBudget:
    """New configs' runs may take at most `share` of the time the shard's other attempts took
    (`--cpci-new-config-share`): a run is admitted when what arrival runs took so far plus its
    estimate stays within it. Shared by the scheduler's threads."""

    def __init__(self, share: float, configs_s: Callable[[], float]) -> None:
        self.share = share
        self._configs_s = configs_s  # every attempt's time so far, arrival runs included
        self._spent = 0.0
        self._lock = threading.Lock()

    def admit(self, estimate_s: float) -> bool:
        """Reserve `estimate_s` for one arrival run; False when it would go past the share."""
        with self._lock:
            others = self._configs_s() - self._spent
            if self._spent + estimate_s > self.share * others:
                return False
            self._spent += estimate_s
            return True

    def spent(self, estimate_s: float, actual_s: float) -> None:
        """An admitted run took `actual_s`, not the `estimate_s` it reserved."""
        with self._lock:
            self._spent += actual_s - estimate_s


@dataclass(frozen=True)
class RerunPolicy:
    """How hard the runner tries before it calls a failure a failure, and a new config safe."""

    reruns: int = 0
    isolate: bool = False
    mode: RerunMode = "fixed"
    evidence: RunEvidence = field(default_factory=lambda: RunEvidence(None, "none"))
    new_config_runs: int = 0
    arrival_budget: ArrivalBudget | None = None
    #: The most seconds one polluter search takes (`--cpci-bisect-time`).
    bisect_time: float = 600.0

    @property
    def rule(self) -> RerunRule:
        """The rule every rerun is decided by (fixed where the evidence could not be had)."""
        return self.evidence.rule(self.mode, self.reruns)

    def decide(self, attempts: Sequence[ResultRecord]) -> RerunDecision:
        """After the config's attempts so far, rerun it or stop, and why."""
        latest = attempts[-1]
        return decide_rerun(attempts, self.evidence.entry(latest.config_key), self.rule)

    def alone_runs(self, shared: bool) -> int:
        """The most alone runs a failing config gets: the cap, and at least one to isolate it."""
        return max(self.reruns, 1 if self.isolate and shared else 0)

    def arrival_runs(self, record: ResultRecord) -> int:
        """The extra runs of a config that passed its first attempt (`--cpci-new-config-runs`)."""
        if record.outcome not in ("passed", "xfailed"):
            return 0
        return self.new_config_runs if self.is_new(record) else 0

    def is_new(self, record: ResultRecord) -> bool:
        """Whether the config is run as new (`--cpci-new-config-runs` asked, and it is new to
        the base branch or its test file changed): its runs after the first, arrival runs after
        a pass and reruns after a failure, are marked `arrival`, so the service can tell a
        flaky config being added (FLAKY ON ARRIVAL) from one that was flaky before."""
        if self.new_config_runs == 0:
            return False
        test_file = record.nodeid.split("::", 1)[0]
        return self.evidence.arrival_runs(record.config_key, test_file, self.new_config_runs) > 0

    def why_new(self, record: ResultRecord) -> str:
        """Why a config gets arrival runs, in the words its records keep."""
        entry = self.evidence.entry(record.config_key)
        if self.evidence.summary is not None and (entry is None or not entry.record.trials):
            return "no history on the base branch"
        return "its test file changed (--cpci-changed-files)"

    def stop_at_once(self, record: ResultRecord) -> RerunDecision | None:
        """Why a first attempt that is not rerun stops there: the decision, for a failure when
        reruns were allowed (None otherwise: nothing was weighed)."""
        if record.outcome not in RERUN_OUTCOMES or self.reruns == 0:
            return None
        return self.decide([record])

    def wants_rerun(self, record: ResultRecord, shared: bool) -> bool:
        """Whether this attempt (in a shared world or alone) is followed by more runs: a
        failure the rule (or isolation) reruns, or a new config's arrival runs."""
        if record.outcome not in RERUN_OUTCOMES:
            return self.arrival_runs(record) > 0
        if self.isolate and shared:
            return True
        return self.alone_runs(shared) > 0 and self.decide([record]).rerun
