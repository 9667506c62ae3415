"""Regression or flake? How likely a config's failures are under its known flakiness.

Dr. CI's most filed complaint is real failures called flaky because the config *was* flaky. A
config that failed on every one of k attempts is weighed by the chance that a flake would do
that: u^k, where u is an upper credible bound on its failure rate from trusted history
(`credible.jeffreys_upper`), times the chance that a flaky failure shows a signature never seen
before when the failure's signature is new (Good-Turing: the share of past flaky failures whose
signature was seen only once, add-one smoothed). Below `threshold` the flake explanation is
rejected and the failure is the PR's.

The service weighs a PR's head with it (`cpci.server.analysis.verdicts`), and the runner weighs
each failure with it before deciding on a rerun (`cpci.evidence.reruns`): one rule, one module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cpci.evidence.credible import jeffreys_upper
from cpci.schema import FlakeRecord, FlakeTest


@dataclass(frozen=True)
class EvidencePolicy:
    """`threshold`: the chance below which failures are not a flake's
    (`CPCI_FLAKE_CHANCE_THRESHOLD`); `level`: the credible level of the failure rate's upper
    bound (`CPCI_FLAKE_CREDIBLE_LEVEL`). The evidence summary carries the service's values, so
    the runner decides with the numbers the service judges by."""

    threshold: float = 0.2
    level: float = 0.95

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError(f"the chance threshold must be between 0 and 1, got {self.threshold}")
        if not 0 < self.level < 1:
            raise ValueError(f"the credible level must be between 0 and 1, got {self.level}")


def flake_test(
    record: FlakeRecord,
    failed_attempts: int,
    signatures: Iterable[str],
    policy: EvidencePolicy,
) -> FlakeTest:
    """How likely `failed_attempts` failures out of as many attempts are for this flake, given
    the `signatures` those failures showed (`cpci.evidence.signatures.signature`)."""
    upper = jeffreys_upper(record.failures, record.trials, policy.level)
    novel = bool(record.signatures) and any(s not in record.signatures for s in signatures)
    share = record.novel_share if novel else 1.0
    chance = upper ** max(failed_attempts, 1) * share
    return FlakeTest(
        failed_attempts=failed_attempts,
        history_failures=record.failures,
        history_trials=record.trials,
        rate_upper=round(upper, 4),
        level=policy.level,
        novel_signature=novel,
        novel_share=round(share, 4),
        chance=chance,
        threshold=policy.threshold,
    )


def tally_signatures(signatures: Iterable[str]) -> dict[str, int]:
    """Failures per signature, as a `FlakeRecord` keeps them."""
    return dict(Counter(signatures))
