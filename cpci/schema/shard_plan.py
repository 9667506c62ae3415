"""What one shard was planned from, as the runner writes it beside its results file.

Shards of one CI run that were planned from different inputs (another set of collected configs,
other durations, another shard total or sharding algorithm) may drop a config or run it twice.
Each shard's runner hashes its plan inputs; the uploader sends the hash with the shard and the
service's PR report flags the run whose shards disagree.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from cpci.schema.fields import MAX_SHARDS, WireModel

SHARD_PLAN_SCHEMA = "cpci.plan/1"
#: Where the runner writes the plan, next to `--cpci-results PATH`.
SHARD_PLAN_SUFFIX = ".plan.json"
#: A plan hash as stored: SHA-256, hex.
PLAN_HASH_PATTERN = r"^[0-9a-f]{64}$"


class ShardPlan(WireModel):
    """One shard's plan: which shard of how many, and the hash of everything it was planned from."""

    schema_: Literal["cpci.plan/1"] = Field(default="cpci.plan/1", alias="schema")
    shard_index: int = Field(ge=0, lt=MAX_SHARDS)
    shard_total: int = Field(ge=1, le=MAX_SHARDS)
    plan_hash: str = Field(pattern=PLAN_HASH_PATTERN)
    configs: int = Field(ge=0, description="collected node ids the plan shared out")
    durations_from: str = Field(default="", description="where the durations came from")


def plan_path(results: str) -> str:
    """The plan file that belongs to the results file `results`."""
    return results + SHARD_PLAN_SUFFIX


class PlanMismatch(BaseModel):
    """Shards of one run and leg that were planned from different inputs."""

    leg: str = Field(default="", description="the matrix leg; '' for a run without a matrix")
    shard_total: int
    groups: list[list[int]] = Field(
        description="shard indexes sharing one plan hash, largest group first"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        named = [f"{group[0]}/{self.shard_total}" for group in self.groups]
        listed = ", ".join(named[:-1]) + f" and {named[-1]}"
        where = f" on leg {self.leg}" if self.leg else ""
        return (
            f"shards {listed}{where} were planned from different inputs: configs may have "
            "been dropped or run twice"
        )


def read_plan(path: str) -> ShardPlan | None:
    """The plan file at `path`; None when there is none (a runner that sharded nothing, or an
    older one). ValueError when it is not a `cpci.plan/1` record."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    return ShardPlan.model_validate_json(text)
