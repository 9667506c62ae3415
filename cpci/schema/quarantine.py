"""Quarantines as the API takes and answers them, and as `cpci quarantine` prints them.

A maintainer quarantines a config that blocks others while it is fixed; it still runs and is
recorded, never gates, and is listed under its own heading in the PR comment. It is released when
its base-branch evidence since the quarantine began bounds its failure rate below the service's
`release_rate` at its credible `level` (`cpci.evidence.release`), never on a calendar.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from cpci.schema.fields import Identity, WireModel
from cpci.schema.flakiness import FlakeRecord

#: A config key is a node id (at most 2,000 characters) and `@WORLD_SIZE`.
MAX_CONFIG_KEY_LENGTH = 2_100
MAX_REASON_LENGTH = 2_000


class QuarantineRequest(WireModel):
    """Quarantine `config` (POST .../quarantines), or release it (POST .../quarantines/release),
    saying why."""

    config: Identity = Field(
        min_length=3, max_length=MAX_CONFIG_KEY_LENGTH, description="NODEID@WORLD_SIZE"
    )
    reason: str = Field(min_length=1, max_length=MAX_REASON_LENGTH)


class QuarantineEntry(BaseModel):
    """One quarantine: who, why and since when; whether and how it ended; and the evidence its
    release is weighed by (`evidence`: the base branch's attempts since it began)."""

    config: str
    reason: str
    by: str
    since: datetime
    released_at: datetime | None = None
    released_by: str | None = Field(
        default=None, description="`evidence` when its results released it, else who did"
    )
    release_note: str | None = None
    evidence: FlakeRecord
    rate_upper: float = Field(description="the failure rate's upper bound from `evidence`")
    passes_to_release: int = Field(
        description="straight passes on the base branch that would release it (0: it is due)"
    )

    @property
    def open(self) -> bool:
        return self.released_at is None


class QuarantineList(BaseModel):
    """A repository's quarantines (open ones, or all), and the rule that releases them."""

    repository: str
    branch: str | None = Field(description="the trusted branch whose results release them")
    release_rate: float = Field(description="CPCI_QUARANTINE_RELEASE_RATE")
    level: float = Field(description="CPCI_FLAKE_CREDIBLE_LEVEL")
    quarantines: list[QuarantineEntry]
