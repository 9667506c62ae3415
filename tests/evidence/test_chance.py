"""The flake test's policy and the figures it reports: the edges its mutants moved unseen
(benchmarks/mutation.py's survivors in cpci/evidence/chance.py)."""

from __future__ import annotations

import dataclasses

import pytest

from cpci.evidence.chance import EvidencePolicy, flake_test
from cpci.evidence.credible import jeffreys_upper
from cpci.schema import FlakeRecord


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"threshold": 0.0}, "chance threshold"),
        ({"threshold": 1.0}, "chance threshold"),
        ({"level": 0.0}, "credible level"),
        ({"level": 1.0}, "credible level"),
    ],
)
def test_a_policy_at_an_edge_of_its_range_is_refused(fields: dict[str, float], says: str) -> None:
    """Both bounds are open: a threshold of 0 rejects no flake and 1 every one; a credible
    level of 0 or 1 has no bound."""
    with pytest.raises(ValueError, match=f"the {says} must be between 0 and 1"):
        EvidencePolicy(**fields)


def test_a_policy_just_inside_its_range_is_taken() -> None:
    policy = EvidencePolicy(threshold=1e-9, level=1 - 1e-9)
    assert (policy.threshold, policy.level) == (1e-9, 1 - 1e-9)


def test_a_policy_cannot_change_once_made() -> None:
    """The runner and the service judge by the same numbers: nothing may alter them later."""
    policy = EvidencePolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.threshold = 0.5  # type: ignore[misc]


def test_the_reported_bound_and_share_are_rounded_to_four_places() -> None:
    record = FlakeRecord(failures=5, trials=20, signatures={"a": 1, "b": 4})
    policy = EvidencePolicy()
    test = flake_test(record, 2, ["c"], policy)
    upper = jeffreys_upper(5, 20, policy.level)
    assert test.novel_signature
    assert test.rate_upper == round(upper, 4) != round(upper, 5)
    assert test.novel_share == round(record.novel_share, 4) != round(record.novel_share, 5)
    assert test.chance == pytest.approx(upper**2 * record.novel_share)
