"""The PR report: what the service says about a pull request, and what the bot renders.

The GitHub bot, the Action's report mode and the web UI read it, so it is fully typed: verdict
sections, counts of configs and of results ("configs vs runs"), shard progress, the baseline it
was compared with, and for every config its stable id, database id and a history link.

Sections are capped: a report holds at most `section_cap` items per section (the first in config
order) and `section_totals` says how many there are; `ReportSectionPage` pages through the rest.
When every config of a shard fails one way (a broken NCCL install, a dead runner), the report
says so once, in `storms`, instead of listing tens of thousands of configs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cpci.schema.evidence_summary import QuarantineState
from cpci.schema.flakiness import FlakeTest, FlakinessAssessment
from cpci.schema.results import OrderDependence
from cpci.schema.runs import RunRef, ShardProgress
from cpci.schema.verdicts import Verdict


class BaselineInfo(BaseModel):
    """Which base commit the head was compared with, and why that one."""

    requested_commit: str | None
    used_commit: str | None
    commits_behind: int | None = Field(description="0 when the base commit itself was used")
    run: RunRef | None
    note: str


class ArrivalRuns(BaseModel):
    """What the head showed of a config the runner ran as new (`--cpci-new-config-runs`: new
    to the base branch, or its test file changed): its runs there, the first and the extra
    ones alone in fresh worlds (its arrival runs: after a first pass, K more; after a first
    failure, its reruns). A failure and a pass among them is FLAKY ON ARRIVAL."""

    failed: int = Field(ge=0, description="its runs at head that failed")
    runs: int = Field(ge=1, description="its runs at head, arrival runs included")

    def text(self) -> str:
        """ "1 of 3 runs failed, arrival runs included" """
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        return f"{self.failed} of {runs} failed, arrival runs included"


class ConfigVerdict(BaseModel):
    """One config's verdict at head, the reason for it and the evidence weighed."""

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
    attempts: int = Field(default=1, ge=0, description="its attempts at head (reruns included)")
    decided_after: int | None = Field(
        default=None,
        description="the attempt after which the runner's chance test decided the failure and "
        "stopped its reruns (its `stop_reason`); null when the reruns stopped otherwise",
    )
    arrival: ArrivalRuns | None = Field(
        default=None, description="its arrival runs at head; null when it had none"
    )
    order_dependence: OrderDependence | None = Field(
        default=None, description="the polluter the runner's bisection found, where it ran one"
    )
    quarantine: QuarantineState | None = Field(
        default=None, description="its open quarantine: it is listed apart and never gates"
    )
    would_be: Verdict | None = Field(
        default=None,
        description="a quarantined config's verdict had it not been quarantined",
    )


class Shift(BaseModel):
    """A number (a duration or a metric) that moved beyond its base history's noise."""

    name: str
    value: float
    baseline_median: float
    baseline_mad: float
    samples: int
    change: float
    relative: float | None
    direction: Literal["up", "down"]


class ShiftFinding(BaseModel):
    """A config whose duration or metric shifted against the base."""

    config: str
    config_pk: int
    history_url: str
    shift: Shift


class ReportCounts(BaseModel):
    """Configs and results are counted apart: one config may run in several environments."""

    configs: int = Field(description="distinct configs at head")
    results: int = Field(description="results at head: one config may run in several envs")
    by_verdict: dict[str, int]


class Storm(BaseModel):
    """A shard (on one matrix leg) where most configs failed with one signature: one cause,
    named once. With an infra rule its configs are INFRA (docs/verdicts.md, "Storms")."""

    shard: int = Field(description="the shard index")
    leg: str = Field(default="", description="the CI matrix leg ('' when none)")
    signature: str = Field(description="the failure signature the configs share")
    configs: int = Field(description="configs on the shard that failed with it")
    of: int = Field(description="configs on the shard at head")
    infra_rule: str | None = Field(
        default=None, description="the infra rule the signature matches; null when none does"
    )

    @property
    def text(self) -> str:
        """ "shard 3 on h100: 7,980 of 8,000 configs" """
        leg = f" on {self.leg}" if self.leg else ""
        return f"shard {self.shard}{leg}: {self.configs:,} of {self.of:,} configs"


#: The report's capped sections, as the paged endpoint names them.
ReportSectionName = Literal[
    "new_failures",
    "flaky_on_arrival",
    "broken_at_base",
    "flaky",
    "infra",
    "fixed",
    "no_baseline",
    "pending",
    "quarantined",
    "duration_regressions",
    "metric_drift",
]
SHIFT_SECTIONS: frozenset[str] = frozenset({"duration_regressions", "metric_drift"})


class PullRequestReport(BaseModel):
    """Everything the PR comment, the check run and the PR page show, in one record."""

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
    flaky_on_arrival: list[ConfigVerdict] = []
    broken_at_base: list[ConfigVerdict] = []
    flaky: list[ConfigVerdict] = []
    infra: list[ConfigVerdict] = []
    fixed: list[ConfigVerdict] = []
    no_baseline: list[ConfigVerdict] = []
    pending: list[ConfigVerdict] = []
    quarantined: list[ConfigVerdict] = []
    duration_regressions: list[ShiftFinding] = []
    metric_drift: list[ShiftFinding] = []
    storms: list[Storm] = []
    section_cap: int | None = Field(
        default=None, description="the most items a section holds here; null: uncapped"
    )
    section_totals: dict[str, int] = Field(
        default_factory=dict,
        description="each section's full length; page through the rest at .../report/{section}",
    )

    def total(self, section: str) -> int:
        """The section's full length: its total when capped, else its own length."""
        found = self.section_totals.get(section)
        return found if found is not None else len(getattr(self, section))


class ReportSectionPage(BaseModel):
    """One page of a report section: `verdicts` for a verdict section, `shifts` for the
    duration and metric sections; `next_offset` is null on the last page."""

    repository: str
    pull_request: int
    head_commit: str
    section: ReportSectionName
    total: int
    offset: int
    limit: int
    next_offset: int | None
    verdicts: list[ConfigVerdict] = []
    shifts: list[ShiftFinding] = []
