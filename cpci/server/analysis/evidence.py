"""Regression or flake? How likely a config's failures at head are under its known flakiness.

Dr. CI's most filed complaint is real failures called flaky because the config *was* flaky. A
config that failed on every one of k attempts at head (the runner reruns failures) is weighed by
the chance that a flake would do that: u^k, where u is an upper credible bound on its failure rate
from trusted history (`credible.jeffreys_upper`), times the chance that a flaky failure shows a
signature never seen before when the head's signature is new (Good-Turing: the share of past
flaky failures whose signature was seen only once, add-one smoothed). Below `threshold` the
flake explanation is rejected and the failure is the PR's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cpci.schema import FlakeRecord, FlakeTest
from cpci.server.analysis.credible import jeffreys_upper


@dataclass(frozen=True)
class EvidencePolicy:
    """`threshold`: the chance below which failures at head are not a flake's; `level`: the
    credible level of the failure rate's upper bound."""

    threshold: float = 0.2
    level: float = 0.95


def flake_test(
    record: FlakeRecord,
    failed_attempts: int,
    head_signatures: Iterable[str],
    policy: EvidencePolicy,
) -> FlakeTest:
    """How likely `failed_attempts` failures out of as many attempts are for this flake."""
    upper = jeffreys_upper(record.failures, record.trials, policy.level)
    novel = bool(record.signatures) and any(s not in record.signatures for s in head_signatures)
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
    return dict(Counter(signatures))
