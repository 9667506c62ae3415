"""How a report points at a CI run: its ids, its links and how many of its shards are in.

A run here is every attempt of one CI run merged (a rerun of failed jobs re-uploads only their
shards). One family: `RunLink` is what every mention of a run carries (evidence lists, history
entries); `RunRef` is that link plus what a report section or run page opens with (branch, pull
request, API twin, shard progress), so anything that takes a link takes a full reference too.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from cpci.schema.shard_plan import PlanMismatch


class RunLink(BaseModel):
    """Enough to find a CI run again: its ids, commit, and a link to it."""

    ci_run_id: str
    ci_attempt: int
    commit: str
    url: str


class ShardProgress(BaseModel):
    """How many of a run's shards were uploaded, per matrix leg where there are legs."""

    reported: int
    expected: int
    missing: list[int] = Field(description="shard indexes not uploaded yet (on some leg)")
    legs: list[str] = Field(
        default_factory=list, description="matrix legs seen; empty for a run without a matrix"
    )
    missing_by_leg: dict[str, list[int]] = Field(
        default_factory=dict, description="per matrix leg, its shard indexes not uploaded yet"
    )
    plan_mismatches: list[PlanMismatch] = Field(
        default_factory=list,
        description="legs whose shards were planned from different inputs (plan hashes)",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        return self.reported >= self.expected

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        if len(self.legs) > 1:
            return f"{self.reported}/{self.expected} shards on {len(self.legs)} legs"
        return f"{self.reported}/{self.expected} shards reported"


class RunRef(RunLink):
    """A CI run (all its attempts merged: a rerun of failed jobs re-uploads only their shards)."""

    ci_attempt: int = Field(description="the latest attempt")
    branch: str | None
    pull_request: int | None
    api_url: str
    shards: ShardProgress
