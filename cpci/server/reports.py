"""The service's own read models: run summary, history page and flaky list.

These answer the API's read endpoints and nothing outside the service reads them. The PR
report, and the run references and flakiness evidence they share with it, are wire types
(`cpci.schema`): the GitHub bot and the Action read those too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from cpci.schema import FlakinessAssessment, RunLink, RunRef
from cpci.server.models import EnvironmentPublic


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
