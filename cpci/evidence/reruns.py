"""Whether a failed config is run again: the rerun rule the runner applies and the verdict
corpus simulates, in one place.

Every rerun costs a GPU attempt, so a failure is rerun only while a rerun can still change what
the service will say about it (`docs/verdicts.md`, "Reruns"):

- a pass ends it: the config is flaky (a pass after a failure), nothing more to learn;
- a failure no flake of the config would show ends it: the config's base-branch record
  (`ConfigEvidence`, from the evidence summary the runner fetched before the run) bounds its
  failure rate by u, and the chance test's u^k (times the new-signature share) below the stop
  level (`RerunRule.stop`, 1% by default) means a flake fails like this less than once in a
  hundred runs of the config, so another failure would not change the verdict;
- otherwise it is rerun alone, up to `cap` reruns (`--cpci-reruns`).

The stop level is stricter than the verdict's threshold (`CPCI_FLAKE_CHANCE_THRESHOLD`, 20%) on
purpose: stopping is a false alarm whenever the failure was a flake's, and at the threshold a
rarely flaky config (u < 0.2) would stop at its first failure and be called the PR's every time
it flaked. Below 1%, the runs that stop on a flake's failures are at most 1 in 100 of that
config's runs, the false-alarm rate cpci aims at (once a flake has failed, its reruns all fail
too with chance u^(k-1), at most 1%/u: the share of flaky failures measured in the docs).

`fixed` is the rule before it: every failure rerun `cap` times, stopping at the first pass (the
runner's fallback when the summary could not be fetched). The runner calls `decide_rerun` after
each attempt of a failing config and writes the answer into its records: the decision that asked
for attempt k + 1 is that record's `rerun_reason`; the one that stopped is the final record's
`stop_reason`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from cpci.evidence.chance import EvidencePolicy, flake_test
from cpci.evidence.signatures import record_signature
from cpci.schema import FAILING_OUTCOMES, NOT_RUN_OUTCOMES, ConfigEvidence, FlakeTest, ResultRecord

RerunMode = Literal["adaptive", "fixed"]
RERUN_MODES: tuple[RerunMode, ...] = get_args(RerunMode)
#: Outcomes worth a rerun: failures of a config that ran (a world that never came up says
#: nothing about the config's code).
RERUN_OUTCOMES = FAILING_OUTCOMES - NOT_RUN_OUTCOMES
#: What a decision rests on: `passed` (a pass ends the reruns), `not-a-failure` (skipped, never
#: ran), `decided` (the chance test calls it the PR's), `cap` (the reruns are spent); a rerun
#: is `undecided` (a flake could still explain it), `no-history` (nothing to weigh it with) or
#: `fixed` (the fixed rule).
DecisionKind = Literal[
    "passed", "not-a-failure", "decided", "cap", "undecided", "no-history", "fixed"
]
#: The default stop level: a flake's run ends called the PR's at most once in 100 runs.
STOP_CHANCE = 0.01
#: The Action's rerun cap for each mode when its `reruns` input is left empty. Adaptive spends a
#: rerun only while the evidence cannot decide, so a higher cap costs little and lets a flake
#: pass where two straight failures of a 30% flake would be called the PR's: on the verdict
#: corpus (docs/verdicts.md, "Reruns") cap 5 gave 1.1% false alarms at 1.32 reruns per failing
#: config, cap 2 6.0% at 1.23; fixed reruns every failure to the cap, so it keeps 2 (as does
#: adaptive with no evidence to stop by: the Action without a server-url).
DEFAULT_CAPS: dict[RerunMode, int] = {"adaptive": 5, "fixed": 2}


@dataclass(frozen=True)
class RerunRule:
    """How failures are rerun: `mode` (`--cpci-reruns-policy`), at most `cap` reruns of one
    failure (`--cpci-reruns`), weighed with `evidence` (the service's threshold and credible
    level, as the evidence summary states them); adaptive reruns stop once the chance is below
    `stop_chance`, or below the threshold where that is stricter (`stop`)."""

    mode: RerunMode = "adaptive"
    cap: int = 2
    evidence: EvidencePolicy = field(default_factory=EvidencePolicy)
    stop_chance: float = STOP_CHANCE

    def __post_init__(self) -> None:
        if self.mode not in RERUN_MODES:
            raise ValueError(
                f"the rerun mode must be one of {', '.join(RERUN_MODES)}, got {self.mode!r}"
            )
        if self.cap < 0:
            raise ValueError(f"the rerun cap must be >= 0, got {self.cap}")
        if not 0 < self.stop_chance < 1:
            raise ValueError(
                f"the rerun stop level must be between 0 and 1, got {self.stop_chance}"
            )

    @property
    def stop(self) -> float:
        """The chance below which a failure is decided and its reruns stop: `stop_chance`,
        never looser than the verdict's threshold (a service may judge by a stricter one)."""
        return min(self.stop_chance, self.evidence.threshold)


@dataclass(frozen=True)
class RerunDecision:
    """Rerun or stop, and why in words a results file keeps (`rerun_reason`, `stop_reason`);
    `chance` holds the numbers where the chance test was asked."""

    rerun: bool
    why: str
    kind: DecisionKind
    chance: FlakeTest | None = None


def decide_rerun(
    attempts: Sequence[ResultRecord], evidence: ConfigEvidence | None, rule: RerunRule
) -> RerunDecision:
    """After the config's `attempts` so far (oldest first, the latest last: the records the
    runner wrote for it), whether to run it again. `evidence` is the config's entry of the
    evidence summary; None when the summary has none (no history on the base branch)."""
    if not attempts:
        raise ValueError("decide_rerun needs the config's attempts so far, got none")
    latest = attempts[-1]
    done = len(attempts) - 1
    if latest.flaky or latest.outcome not in FAILING_OUTCOMES:
        if latest.outcome in ("skipped", "xfailed"):
            return RerunDecision(False, f"{latest.outcome}: nothing to rerun", "not-a-failure")
        after = f" after {done} failed attempt(s): flaky" if done else ""
        return RerunDecision(False, f"passed on attempt {len(attempts)}{after}", "passed")
    if latest.outcome not in RERUN_OUTCOMES:
        return RerunDecision(False, f"{latest.outcome}: never rerun", "not-a-failure")
    failed = [a for a in attempts if a.outcome in RERUN_OUTCOMES]
    if done >= rule.cap:
        return RerunDecision(
            False,
            f"failed {len(failed)}/{len(attempts)} attempts: the {rule.cap} rerun(s) allowed "
            "(--cpci-reruns) are spent",
            "cap",
        )
    if rule.mode == "fixed":
        return RerunDecision(True, f"fixed reruns: rerun {done + 1} of {rule.cap}", "fixed")
    if evidence is None or not evidence.record.trials:
        return RerunDecision(
            True,
            "no history on the base branch to weigh the failure against: rerun "
            f"{done + 1} of at most {rule.cap}",
            "no-history",
        )
    signatures = [s for s in map(record_signature, failed) if s]
    test = flake_test(evidence.record, len(failed), signatures, rule.evidence)
    numbers = (
        f"failed {len(failed)}/{len(attempts)}; failure rate <= {test.rate_upper:.2f} "
        f"({test.history_failures}/{test.history_trials} attempts failed on the base branch"
        f"{'; a new error signature' if test.novel_signature else ''}); a flake fails so with "
        f"chance {test.chance:.1%}"
    )
    if test.chance < rule.stop:
        why = f"decided after {len(attempts)} attempt(s): {numbers} < {rule.stop:.1%}"
        return RerunDecision(False, why, "decided", test)
    why = f"{numbers} >= {rule.stop:.1%}: rerun {done + 1} of at most {rule.cap}"
    return RerunDecision(True, why, "undecided", test)
