"""One shard's upload: where and when its results were produced, and the results.

The uploader builds a `cpci.run/1` envelope around the runner's results and the service stores
exactly what validates here; the bounds are the stored columns' (`cpci.schema.fields`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from cpci.schema.fields import (
    INT32_MAX,
    MAX_LEG_LENGTH,
    MAX_SHARDS,
    CommitSha,
    Identity,
    LegName,
    WireModel,
)
from cpci.schema.results import ResultRecord
from cpci.schema.shard_plan import PLAN_HASH_PATTERN

RUN_SCHEMA = "cpci.run/1"
SUPPORTED_RUN_SCHEMAS = (RUN_SCHEMA,)


#: The longest value of each environment field: the service stores each in a column this long
#: (its `environment` table is built from this map), so a longer one is refused at the door.
ENVIRONMENT_LENGTHS = {
    "python": 100,
    "torch": 100,
    "cuda": 100,
    "nccl": 100,
    "gpu": 200,
    "backend": 50,
    "platform": 200,
}


class Environment(WireModel):
    """What the results were produced on; part of a config's identity for flakiness."""

    python: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["python"])
    torch: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["torch"])
    cuda: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["cuda"])
    nccl: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["nccl"])
    gpu: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["gpu"])
    backend: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["backend"])
    platform: Identity | None = Field(default=None, max_length=ENVIRONMENT_LENGTHS["platform"])


class RunEnvelope(WireModel):
    """One shard's upload: where and when the results were produced, and the results."""

    schema_: Literal["cpci.run/1"] = Field(default="cpci.run/1", alias="schema")
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    commit: CommitSha
    branch: Identity | None = Field(default=None, max_length=255)
    pull_request: int | None = Field(default=None, le=INT32_MAX, ge=1)
    base_commit: CommitSha | None = None
    base_branch: Identity | None = Field(
        default=None,
        max_length=255,
        description="the branch a pull request merges into (GitHub's base_ref): its trusted "
        "branch runs are the PR's baseline and history (none: the default trusted branch)",
    )
    merge_commit: CommitSha | None = Field(
        default=None,
        description="a pull request's run in GitHub Actions: the merge commit GitHub made of "
        "`commit` (the PR's head) into its base, which actions/checkout checks out and a "
        "pull_request OIDC token's `sha` claim names (GITHUB_SHA)",
    )
    ci_run_id: Identity = Field(min_length=1, max_length=100)
    ci_attempt: int = Field(default=1, le=INT32_MAX, ge=1)
    shard_index: int = Field(default=0, lt=MAX_SHARDS, ge=0)
    shard_total: int = Field(default=1, le=MAX_SHARDS, ge=1)
    leg: Identity = Field(
        default="",
        max_length=MAX_LEG_LENGTH,
        description="the matrix leg (e.g. its sorted runner labels): shards of one run on "
        "different legs are different shards, even with the same index",
    )
    legs: list[LegName] = Field(
        default_factory=list,
        max_length=100,
        description="every leg the workflow's matrix declares, so a leg that never uploads is "
        "missing rather than unknown (empty: the legs seen are all there are)",
    )
    plan_hash: str | None = Field(
        default=None,
        pattern=PLAN_HASH_PATTERN,
        description="SHA-256 of the shard's plan inputs (`cpci.schema.shard_plan`): shards of "
        "one run with different hashes were planned differently and may drop or repeat configs",
    )
    runner_name: Identity | None = Field(default=None, max_length=255)
    runner_labels: list[str] = Field(default_factory=list)
    environment: Environment = Field(default_factory=Environment)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    results: list[ResultRecord]

    @field_validator("ci_run_id")
    @classmethod
    def _not_only_dots(cls, value: str) -> str:
        """A run's page is `.../runs/CI_RUN_ID`, and a path segment of dots alone (`.`, `..`,
        even quoted) is resolved by browsers as the current or parent folder."""
        if not value.strip("."):
            raise ValueError(f"ci_run_id {value!r} is only dots: name the run, e.g. its run number")
        return value
