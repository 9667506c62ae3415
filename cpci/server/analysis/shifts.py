"""Has a number moved beyond its history's noise? One test for durations and metrics alike.

Median and MAD, not mean and standard deviation: one slow outlier in the base history should not
hide the next regression. A shift must clear the noise (k scaled MADs) *and* a relative and an
absolute floor, so a config whose history is perfectly flat does not fire on a 1 ms wobble.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cpci.schema import Shift

MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class ShiftPolicy:
    min_samples: int
    k: float
    min_relative: float
    min_absolute: float
    directions: Literal["up", "both"]


#: Slower by 25% and 50 ms, beyond 4 MADs, with at least 3 base results.
DURATION_POLICY = ShiftPolicy(3, 4.0, 0.25, 0.05, "up")
#: A metric (e.g. max abs error vs the reference) moving by half its base value, either way.
METRIC_POLICY = ShiftPolicy(1, 4.0, 0.5, 1e-12, "both")


def median(values: Sequence[float]) -> float:
    """`statistics.median` without its generality: called twice per config of a report."""
    n = len(values)
    if n == 1:
        return values[0]  # one head result, one base run: the common case
    if n == 0:
        raise statistics.StatisticsError("no median for empty data")
    ordered = sorted(values)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def robust_shift(
    name: str, baseline: Sequence[float], value: float, policy: ShiftPolicy
) -> Shift | None:
    """The shift of `value` against `baseline`, or None when it is within the noise."""
    if len(baseline) < policy.min_samples or not baseline:
        return None
    centre = median(baseline)
    change = value - centre
    if change < 0 and policy.directions == "up":
        return None
    if abs(change) <= max(policy.min_relative * abs(centre), policy.min_absolute):
        return None  # the cheap floors first: most configs stop here
    mad = median([abs(x - centre) for x in baseline])
    floor = max(
        policy.k * MAD_TO_SIGMA * mad, policy.min_relative * abs(centre), policy.min_absolute
    )
    if abs(change) <= floor:
        return None
    return Shift(
        name=name,
        value=value,
        baseline_median=centre,
        baseline_mad=mad,
        samples=len(baseline),
        change=change,
        relative=change / abs(centre) if centre else None,
        direction="up" if change > 0 else "down",
    )
