"""A quarantine's release: the failure rate's bound under the target, and the passes it takes."""

from __future__ import annotations

import pytest

from cpci.evidence import MOST_PASSES, jeffreys_upper, passes_to_release, releasable
from cpci.schema import FlakeRecord


def test_from_nothing_38_straight_passes_bound_the_rate_below_five_percent() -> None:
    nothing = FlakeRecord(failures=0, trials=0)
    assert passes_to_release(nothing, 0.05, 0.95) == 38
    assert jeffreys_upper(0, 38, 0.95) < 0.05 <= jeffreys_upper(0, 37, 0.95)
    assert not releasable(FlakeRecord(failures=0, trials=37), 0.05, 0.95)
    assert releasable(FlakeRecord(failures=0, trials=38), 0.05, 0.95)


def test_failures_since_the_quarantine_take_more_passes_and_a_live_flake_never_gets_there() -> None:
    one = FlakeRecord(failures=1, trials=20)
    needed = passes_to_release(one, 0.05, 0.95)
    assert needed > 38 - 20
    assert releasable(FlakeRecord(failures=1, trials=20 + needed), 0.05, 0.95)
    assert not releasable(FlakeRecord(failures=1, trials=19 + needed), 0.05, 0.95)
    # A config still failing 1 attempt in 5 is bounded above 0.05 however long it runs.
    assert not releasable(FlakeRecord(failures=200, trials=1000), 0.05, 0.95)
    assert passes_to_release(FlakeRecord(failures=0, trials=100), 0.05, 0.95) == 0


def test_a_rate_out_of_range_is_refused_and_the_search_is_bounded() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        passes_to_release(FlakeRecord(failures=0, trials=0), 1.0, 0.95)
    assert passes_to_release(FlakeRecord(failures=0, trials=0), 1e-9, 0.95) == MOST_PASSES
