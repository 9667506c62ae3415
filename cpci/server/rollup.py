"""Daily roll-ups of raw results older than the retention (`CPCI_RAW_RETENTION_DAYS`).

One `ResultRollup` row stands for every result of one config in one environment on one day of
one branch (or one pull request's runs): the counts by outcome, the flake record's attempts and
failures (`analysis.flakiness.flake_record`, summed over the day's runs: exact), the runs, the
failing runs and those only a rerun's hidden failure failed, the flaky passes, the failure
signatures with counts, and the passing durations as a `DurationSketch`. Every count adds up, so
a day compacted in several batches, or a late upload compacted later, merges into the same row
(`crud.compact`).

The sketch keeps one count per logarithmic bucket of ratio `GAMMA`: any quantile it gives is
within `RELATIVE_ERROR` (1%) of a duration at that rank, whatever the durations' range, and two
sketches merge by adding counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

import cpci.server.models  # noqa: F401  (the naming convention its constraints follow)

#: Bucket ratio of `DurationSketch`: bucket b holds durations in (GAMMA^(b-1), GAMMA^b].
GAMMA = 1.02
#: What a quantile of the sketch may be off by, relative to the true duration at that rank.
RELATIVE_ERROR = (GAMMA - 1) / (GAMMA + 1)
#: Durations below this (a millisecond's thousandth) share its bucket.
SMALLEST_S = 1e-6


class ResultRollup(SQLModel, table=True):
    """The results of one config in one environment on one UTC `day` of `branch`'s runs
    (`pull_request` 0) or of one pull request's runs, after their raw rows were compacted."""

    __tablename__ = "result_rollup"
    __table_args__ = (
        UniqueConstraint(
            *("config_id", "environment_id", "branch", "pull_request", "day"),
            name="uq_result_rollup_key",
        ),
        Index("ix_result_rollup_config_id_day", "config_id", "day"),
    )

    id: int | None = Field(default=None, primary_key=True)
    config_id: int = Field(foreign_key="config.id")
    environment_id: int = Field(foreign_key="environment.id")
    branch: str = Field(max_length=255)
    pull_request: int = Field(default=0, description="0: the branch's own runs")
    day: date
    results: int = Field(default=0, description="every raw result rolled up, skips included")
    runs: int = Field(default=0, description="runs in which the config passed or failed")
    failed_runs: int = Field(default=0, description="runs in which it failed or needed a rerun")
    rerun_runs: int = Field(
        default=0, description="failed runs whose only failure a passing rerun hides (`flaky`)"
    )
    failures: int = Field(default=0, description="the flake record's failed attempts")
    flaky_passes: int = Field(default=0, description="passes flagged flaky (failed, then passed)")
    trials: int = Field(default=0, description="the flake record's attempts")
    outcomes: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    signatures: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    durations: dict[str, int] = Field(
        default_factory=dict,
        sa_column=Column(JSON, nullable=False),
        description="DurationSketch of the passing results' seconds: bucket -> count",
    )


class DurationSketch:
    """Counts of durations per logarithmic bucket; `quantile` within `RELATIVE_ERROR`."""

    def __init__(self, buckets: Mapping[str, int] | None = None) -> None:
        self.buckets: dict[int, int] = {int(b): int(n) for b, n in (buckets or {}).items()}

    @classmethod
    def of(cls, seconds: Iterable[float]) -> DurationSketch:
        sketch = cls()
        for s in seconds:
            sketch.add(s)
        return sketch

    def add(self, seconds: float, count: int = 1) -> None:
        bucket = math.ceil(math.log(max(seconds, SMALLEST_S), GAMMA))
        self.buckets[bucket] = self.buckets.get(bucket, 0) + count

    def merge(self, other: DurationSketch) -> DurationSketch:
        for bucket, count in other.buckets.items():
            self.buckets[bucket] = self.buckets.get(bucket, 0) + count
        return self

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def stored(self) -> dict[str, int]:
        """The JSON a `ResultRollup.durations` column keeps."""
        return {str(b): n for b, n in sorted(self.buckets.items())}

    def at_rank(self, rank: int) -> float:
        """The (0-based) `rank`-th smallest duration, within `RELATIVE_ERROR`."""
        seen = 0
        for bucket, count in sorted(self.buckets.items()):
            seen += count
            if rank < seen:
                return 2 * GAMMA**bucket / (GAMMA + 1)
        raise IndexError(f"rank {rank} of a sketch of {self.count} durations")

    def median(self) -> float:
        """As `statistics.median` of the durations: the middle one, or the mean of the two."""
        n = self.count
        if n == 0:
            raise ValueError("the median of no durations")
        return (self.at_rank((n - 1) // 2) + self.at_rank(n // 2)) / 2

    def quantile(self, q: float) -> float:
        """The nearest-rank `q` quantile (p50: 0.5, p90: 0.9)."""
        n = self.count
        if n == 0:
            raise ValueError("a quantile of no durations")
        return self.at_rank(min(n - 1, max(0, math.ceil(q * n) - 1)))
