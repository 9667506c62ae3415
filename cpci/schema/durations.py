"""Recorded per-config durations, as the service serves them and the runner balances shards by.

Every shard of a CI run must compute the same plan, so every shard must balance by the same
durations: the service serves one answer per branch (medians of recent trusted runs), the Action
fetches it once per job into a file, and `--cpci-durations` reads that file or the URL. The file
may also be a plain `{node id: seconds}` mapping (what the runner writes when it records its own).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cpci.schema.fields import Finite, WireModel

DURATIONS_SCHEMA = "cpci.durations/1"


class ConfigDurations(WireModel):
    """Seconds per config node id, and what they were computed from."""

    schema_: Literal["cpci.durations/1"] = Field(default="cpci.durations/1", alias="schema")
    repository: str
    branch: str | None = Field(description="the branch whose runs were read; None: none found")
    runs: int = Field(ge=0, description="trusted CI runs the medians were computed from")
    newest_commit: str | None = Field(description="the commit of the newest of those runs")
    durations: dict[str, Finite] = Field(
        description="node id -> median seconds of its passing results in those runs"
    )
