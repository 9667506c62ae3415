"""What the base branch says of each config, fetched by the runner before a run.

The runner decides reruns with the chance test the service judges by (`cpci.evidence`): it needs
each config's base-branch record (failures per attempt, signatures), whether the config is
labelled flaky, whether it has any history there (one without is new: its arrival runs) and
whether it is quarantined. One request per run, `GET /api/v1/repos/OWNER/REPO/evidence?branch=B`,
answers all of it with the service's own threshold and credible level, so the two never decide
with different numbers. Built from the trusted branch's runs only, never a PR's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from cpci.schema.fields import WireModel
from cpci.schema.flakiness import FlakeRecord

EVIDENCE_SCHEMA = "cpci.evidence/1"
#: The most configs one summary holds: as many as one upload may hold results
#: (`CPCI_MAX_RESULTS_PER_UPLOAD`'s default), so a suite the service takes fits one summary.
MAX_EVIDENCE_CONFIGS = 100_000


class QuarantineState(WireModel):
    """A config a maintainer quarantined: it runs and is recorded, but never gates."""

    since: datetime
    by: str = Field(description="who quarantined it: the credential that asked")
    reason: str


class ConfigEvidence(WireModel):
    """One config's base-branch evidence: its `record` (failures per attempt over the service's
    window, `CPCI_FLAKY_WINDOW` results; a rerun that passed counts the failure it hides), the
    flaky label, the branch runs it has results in and its quarantine (None: not quarantined)."""

    record: FlakeRecord
    flaky: bool = False
    runs: int = Field(ge=0, description="branch CI runs it has results in, within the window")
    quarantine: QuarantineState | None = None

    @property
    def has_history(self) -> bool:
        return self.runs > 0


class EvidenceSummary(WireModel):
    """Every config the base branch's recent runs hold (and every quarantined one), by config
    key (`NODEID@WORLD_SIZE`); a config absent from `configs` has no history there."""

    schema_: Literal["cpci.evidence/1"] = Field(default="cpci.evidence/1", alias="schema")
    repository: str
    branch: str
    runs: int = Field(ge=0, description="the branch's CI runs read")
    newest_commit: str | None = Field(description="the commit of the newest of those runs")
    threshold: float = Field(gt=0, lt=1, description="CPCI_FLAKE_CHANCE_THRESHOLD")
    level: float = Field(gt=0, lt=1, description="CPCI_FLAKE_CREDIBLE_LEVEL")
    configs: dict[str, ConfigEvidence] = Field(max_length=MAX_EVIDENCE_CONFIGS)
    truncated: bool = Field(
        default=False,
        description="more configs than MAX_EVIDENCE_CONFIGS: the ones left out have no entry "
        "(the runner treats them as new, which costs runs, never a wrong verdict)",
    )

    def entry(self, key: str) -> ConfigEvidence | None:
        """The config's evidence; None when the branch has no history of it."""
        return self.configs.get(key)
