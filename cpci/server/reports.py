"""The service's read models: run summary, history page, flaky list and the PR report.

The PR report is what the GitHub bot renders into a comment and a check run, so it is fully
typed: verdict sections, counts of configs and of results ("configs vs runs"), shard progress,
and for every config its stable id, database id and a history link.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from cpci.server.analysis.evidence import FlakeTest
from cpci.server.analysis.flakiness import FlakinessAssessment
from cpci.server.analysis.observations import RunLink
from cpci.server.analysis.shifts import Shift
from cpci.server.models import EnvironmentPublic

#: The verdicts, and those a reader must look at in order, come from the one verdict table.
from cpci.verdict_table import ATTENTION as ATTENTION
from cpci.verdict_table import Verdict


class ShardProgress(BaseModel):
    reported: int
    expected: int
    missing: list[int] = Field(description="shard indexes not uploaded yet (on some leg)")
    legs: list[str] = Field(
        default_factory=list, description="matrix legs seen; empty for a run without a matrix"
    )
    missing_by_leg: dict[str, list[int]] = Field(
        default_factory=dict, description="per matrix leg, its shard indexes not uploaded yet"
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


class RunRef(BaseModel):
    """A CI run (all its attempts merged: a rerun of failed jobs re-uploads only their shards)."""

    ci_run_id: str
    ci_attempt: int = Field(description="the latest attempt")
    commit: str
    branch: str | None
    pull_request: int | None
    url: str
    api_url: str
    shards: ShardProgress


class BaselineInfo(BaseModel):
    requested_commit: str | None
    used_commit: str | None
    commits_behind: int | None = Field(description="0 when the base commit itself was used")
    run: RunRef | None
    note: str


class ConfigVerdict(BaseModel):
    config: str = Field(description="stable config id: NODEID@WORLD_SIZE")
    config_pk: int
    history_url: str
    verdict: Verdict
    reason: str
    head_outcome: str
    base_outcome: str | None
    message: str | None = Field(description="first line of the first failing rank's error")
    ranks: list[int] = Field(default_factory=list, description="the ranks that reported errors")
    infra_rule: str | None = None
    flakiness: FlakinessAssessment | None = None
    evidence: FlakeTest | None = Field(
        default=None, description="the regression-or-flake numbers, where flakiness was weighed"
    )
    leg: str = Field(default="", description="the CI matrix leg it ran on ('' when none)")


class ShiftFinding(BaseModel):
    config: str
    config_pk: int
    history_url: str
    shift: Shift


class ReportCounts(BaseModel):
    configs: int = Field(description="distinct configs at head")
    results: int = Field(description="results at head: one config may run in several envs")
    by_verdict: dict[str, int]


class PullRequestReport(BaseModel):
    repository: str
    pull_request: int
    head_commit: str
    status: Literal["complete", "pending"]
    summary: str
    head_runs: list[RunRef]
    shards: ShardProgress
    baseline: BaselineInfo
    counts: ReportCounts
    new_failures: list[ConfigVerdict] = []
    broken_at_base: list[ConfigVerdict] = []
    flaky: list[ConfigVerdict] = []
    infra: list[ConfigVerdict] = []
    fixed: list[ConfigVerdict] = []
    no_baseline: list[ConfigVerdict] = []
    pending: list[ConfigVerdict] = []
    duration_regressions: list[ShiftFinding] = []
    metric_drift: list[ShiftFinding] = []


class FailingConfig(BaseModel):
    config: str
    config_pk: int
    history_url: str
    outcome: str
    message: str | None
    infra_rule: str | None


class RunSummary(BaseModel):
    repository: str
    run: RunRef
    attempts: list[int]
    environments: list[EnvironmentPublic]
    outcomes: dict[str, int]
    configs: int
    failing: list[FailingConfig] = Field(description="failing configs, not compared to a base")


class HistoryEntry(BaseModel):
    result_id: int
    outcome: str
    duration_s: float
    attempt: int
    flaky: bool
    metrics: dict[str, float]
    rank_errors: list[dict[str, Any]]
    environment_id: int
    run: RunLink
    pull_request: int | None
    branch: str | None
    uploaded_at: datetime


class HistoryPage(BaseModel):
    repository: str
    config: str
    config_pk: int
    params: dict[str, Any]
    entries: list[HistoryEntry]
    next_cursor: int | None = Field(description="pass as ?before= for the next (older) page")


class FlakyConfig(BaseModel):
    config: str
    config_pk: int
    history_url: str
    assessment: FlakinessAssessment


class FlakyList(BaseModel):
    repository: str
    window_runs: int
    configs: list[FlakyConfig]
