"""The service's read models (views): what each read endpoint and each page returns.

The API's JSON and the web UI's HTML are two renderings of these same objects, so a script
reading the JSON twin of a page sees the numbers a person sees; plots are drawn from them and
nothing else. The PR report, and the run references and flakiness evidence it shares with these,
are wire types (`cpci.schema`): the GitHub bot and the Action read those too.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cpci.github.consistency import ConsistencyResult
from cpci.github.gate import FailOn, Gate
from cpci.schema import (
    Environment,
    FlakinessAssessment,
    PullRequestReport,
    QuarantineEntry,
    QuickVerdict,
    RunLink,
    RunRef,
    ShardProgress,
)
from cpci.schema.culprit import CulpritRange


class EnvironmentPublic(Environment):
    """A stored environment as readers see it: the uploaded fingerprint and its row id (which
    history entries and shard rows name)."""

    id: int

    @classmethod
    def of(cls, row: Any) -> EnvironmentPublic:
        """A stored row as it was stored, not validated again: rows stored before the wire
        type bounded its fields may hold longer values, and their pages must still show."""
        fields = {name: getattr(row, name) for name in Environment.model_fields}
        return cls.model_construct(id=row.id, **fields)


class RunHeader(BaseModel):
    """What every view of one CI run (attempts merged) starts with. A config is counted by its
    final record, what it came to (`cpci.schema.final_records`: its highest attempt), once per
    shard it ran on; its reruns are counted apart."""

    repository: str
    run: RunRef
    attempts: list[int] = Field(description="the CI run's attempts that uploaded")
    environments: list[EnvironmentPublic]
    outcomes: dict[str, int] = Field(
        description="configs by the outcome of their final record (a pass after failures "
        "counts as passed, and in `flaky`)"
    )
    flaky: int = Field(description="configs whose final record passed after a failure")
    reruns: dict[str, int] = Field(
        description="the results of reruns (attempt 2 and later) by outcome, apart from the "
        "configs they rerun"
    )
    result_outcomes: dict[str, int] = Field(
        description="every result by outcome, reruns included: what the run's results list"
    )


class FailingConfig(BaseModel):
    config: str
    config_pk: int
    history_url: str
    outcome: str
    message: str | None
    infra_rule: str | None


class RunSummary(RunHeader):
    """A run for bots: its outcome counts and failing configs (the API's run endpoint)."""

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


class RolledUp(BaseModel):
    """A config's results older than the retention, kept as daily aggregates
    (`cpci.server.rollup`)."""

    raw_from: date = Field(description="the day raw results start: before it, daily aggregates")
    days: int
    results: int
    failures: int = Field(description="failed attempts, as the flake record counts them")


class HistoryPage(BaseModel):
    repository: str
    config: str
    config_pk: int
    params: dict[str, Any]
    entries: list[HistoryEntry]
    next_cursor: int | None = Field(description="pass as ?before= for the next (older) page")
    aggregates: RolledUp | None = Field(
        default=None,
        description="on the last page (no next_cursor): the results before raw_from, rolled up "
        "per day past the retention (None: none)",
    )


class FlakyConfig(BaseModel):
    config: str
    config_pk: int
    history_url: str
    assessment: FlakinessAssessment


class FlakyList(BaseModel):
    repository: str
    window_runs: int
    configs: list[FlakyConfig]


class RunRow(BaseModel):
    """One CI run (attempts merged) as a row of the dashboard."""

    run: RunRef
    created_at: datetime
    outcomes: dict[str, int]
    results: int
    failing: int
    pass_rate: float | None = Field(description="passes / (passes + failures); skips excluded")
    page_url: str


class FlakyRow(BaseModel):
    config: str
    score: float = Field(description="95% lower bound of the recency-weighted flip rate")
    flip_rate: float
    runs: int
    failures: int
    same_commit: int = Field(description="commits on which it both passed and failed")
    reason: str
    page_url: str


class SlowRow(BaseModel):
    config: str
    duration_s: float
    outcome: str
    page_url: str


class PullRow(BaseModel):
    """A pull request's latest head, with the verdict of its PR report in one word."""

    number: int
    head_commit: str
    branch: str | None
    updated_at: datetime
    shards: ShardProgress
    failing: int = Field(description="configs failing at head, for any reason")
    failing_at_base_too: int | None = Field(
        description="of those, broken at base (null without a baseline)"
    )
    by_verdict: dict[str, int] = Field(description="the PR report's configs per verdict")
    summary: str = Field(description="failing verdicts' counts: '2 new failure(s), 1 flaky'")
    verdict: QuickVerdict
    page_url: str


class BrokenRow(BaseModel):
    """A config failing at the branch's tip that the culprit analysis says broke there (the
    chance test rejects a flake): since which commit, or between which."""

    config: str
    first_bad: str = Field(description="broken since: the oldest commit of the failing stretch")
    last_good: str = Field(description="the newest commit before it that the config passed on")
    untested: int = Field(description="commits between the two that never ran it")
    culprit: str | None = Field(description="the commit that broke it, once one suspect is left")
    reason: str
    page_url: str


class Dashboard(BaseModel):
    repository: str
    branch: str | None = Field(description="the branch shown (default: the most used one)")
    runs: list[RunRow] = Field(description="newest first")
    flaky: list[FlakyRow]
    slowest: list[SlowRow] = Field(description="from the newest run of the branch")
    pulls: list[PullRow]
    broken: list[BrokenRow] = Field(
        default_factory=list,
        description="configs broken on a trusted branch shown, worst first (none on others)",
    )


class TimelineCell(BaseModel):
    commit: str
    state: Literal["pass", "fail", "mixed", "skip"]
    outcomes: dict[str, int]
    ci_run_id: str
    branch: str | None
    pull_request: int | None
    page_url: str


#: What a result's time is: its shard's start, its end, or (the upload said neither) its upload.
TimedBy = Literal["start", "end", "upload"]


class ConfigPoint(BaseModel):
    result_id: int
    when: datetime = Field(description="when the result was produced: see timed_by")
    timed_by: TimedBy = Field(
        description="what `when` is: the shard's start, its end (no start was uploaded), or its "
        "upload time (the upload said neither)"
    )
    outcome: str
    duration_s: float
    metrics: dict[str, float]
    ci_run_id: str
    commit: str
    runner: str | None
    page_url: str


class Signature(BaseModel):
    """Failure messages that differ only in numbers, addresses, paths or ranks."""

    signature: str
    count: int
    example: str
    last_ci_run_id: str
    last_page_url: str


class PlaceStats(BaseModel):
    """Results on one runner or environment: a config failing on one host only is a bad host."""

    name: str
    results: int
    passes: int
    failures: int
    pass_rate: float | None
    environment: EnvironmentPublic | None = None


class PolluterPair(BaseModel):
    """A predecessor (or the smallest set of them) the config failed after, as the runner's
    bisection named it, and how many of its results named it."""

    polluters: list[str] = Field(description="node ids; one: the polluter")
    count: int
    text: str = Field(description="'fails after X', or the set that only fails it together")


class ConfigTriage(BaseModel):
    """What a maintainer acts on for one config on the default trusted branch."""

    branch: str = Field(description="the default trusted branch, whose runs these are")
    culprit: CulpritRange | None = Field(
        description="where it broke on `branch`; None: it never ran there"
    )
    quarantine: QuarantineEntry | None = Field(description="its open quarantine, if any")
    release_rate: float = Field(description="CPCI_QUARANTINE_RELEASE_RATE: the release's target")
    level: float = Field(description="the credible level the release is weighed at")
    order_dependence: list[PolluterPair] = Field(description="most often seen first")
    order_dependence_runs: list[str] = Field(
        description="CI run ids the order-dependent results were in, newest first"
    )


class ConfigOverview(BaseModel):
    repository: str
    config: str
    params: dict[str, Any]
    shown: int = Field(description="results looked at (the newest)")
    timeline: list[TimelineCell] = Field(description="one cell per commit, oldest first")
    points: list[ConfigPoint] = Field(description="oldest first")
    signatures: list[Signature]
    runners: list[PlaceStats]
    environments: list[PlaceStats]
    elsewhere: str | None = Field(description="a runner fails where others pass, if any")
    triage: ConfigTriage | None = Field(
        default=None, description="where it broke, its quarantine, the order dependences seen"
    )
    aggregates: RolledUp | None = Field(
        default=None, description="its results before raw_from, rolled up per day (None: none)"
    )


#: A grid cell: what a config did at a commit (`TimelineCell.state`), "" where it did not run.
GridState = Literal["pass", "fail", "mixed", "skip", ""]
#: A grid row's verdict, its newest result against the one before on the branch: failing since
#: that commit (`new_failure`), failing there too (`broken`, with `broken_since`), failing but
#: flaky (`flaky`), failing with nothing before it (`no_baseline`), `fixed`, `passed`, `skipped`.
GridVerdict = Literal["new_failure", "broken", "flaky", "no_baseline", "fixed", "passed", "skipped"]
#: What a grid row can be filtered on besides its verdict: its markers.
GridMark = Literal["quarantined"]


class GridColumn(BaseModel):
    """One commit of the branch, newest first, with the newest CI run that tested it."""

    commit: str
    ci_run_id: str
    created_at: datetime
    page_url: str


class GridRow(BaseModel):
    config: str
    params: dict[str, Any]
    cells: list[GridState] = Field(description="one per column (commit), newest first")
    verdict: GridVerdict
    broken_since: str | None = Field(
        description="for `broken`: the oldest commit of its failing streak in these columns"
    )
    broken_since_url: str | None = Field(description="the run page at `broken_since`")
    broken_before_window: bool = Field(
        description="the failing streak reaches the oldest column: it began before them"
    )
    flaky: bool = Field(description="labelled flaky by its history, as the dashboard labels it")
    quarantined: str | None = Field(description="the reason it is quarantined; null if not")
    page_url: str


class Grid(BaseModel):
    """Configs x recent commits of a branch: the page people open first to see what is red."""

    repository: str
    branch: str | None
    columns: list[GridColumn] = Field(description="commits, newest first")
    rows: list[GridRow] = Field(description="this page of the matching rows, worst first")
    verdicts: dict[str, int] = Field(description="every row (unfiltered) per verdict")
    configs: int = Field(description="rows before filtering")
    matching: int = Field(description="rows matching the filter, over all pages")
    query: str
    param: str
    outcome_filter: list[GridState]
    verdict_filter: list[GridVerdict | GridMark]
    page: int
    pages: int
    per_page: int


class ShardRow(BaseModel):
    leg: str = Field(default="", description="matrix leg; '' for a run without a matrix")
    index: int
    state: Literal["reported", "missing"]
    attempt: int | None
    runner: str | None
    labels: list[str]
    environment_id: int | None
    started_at: datetime | None
    ended_at: datetime | None
    wall_s: float | None = Field(description="ended_at - started_at, when both were uploaded")
    init_s: float | None = Field(
        description="world start-up: the sum of each world's launch-to-first-config time"
    )
    test_s: float = Field(description="sum of the results' durations")
    other_s: float | None = Field(
        description="wall_s - init_s - test_s: teardown, gaps and the rest, derived"
    )
    worlds: int = Field(description="distinct (batch, world) pairs: torchrun worlds started")
    results: int = Field(description="results stored, reruns included")
    reruns: int = Field(description="results of reruns (attempt 2 and later)")
    outcomes: dict[str, int] = Field(description="configs by the outcome of their final record")


class ResultRow(BaseModel):
    config: str
    outcome: str
    duration_s: float
    attempt: int
    flaky: bool
    message: str | None
    batch: str | None
    shard: int
    page_url: str


Sort = Literal["config", "-config", "outcome", "-outcome", "duration", "-duration"]


class RunProvenance(BaseModel):
    """Who uploaded the run (its first shard), as the credential proved it."""

    via: str | None = Field(description="token or oidc; null for runs stored before provenance")
    uploaded_by: str | None = Field(description="token:ID or the OIDC subject")
    event: str | None = Field(description="the workflow's event (OIDC)")
    ref: str | None = Field(description="the workflow's ref (OIDC)")
    workflow: str | None = Field(description="the job's workflow ref (OIDC)")
    fork: bool = Field(description="uploaded by the allow-listed fork-results workflow")


class RunDetail(RunHeader):
    """A run for people: shards, worlds, timings and a page of its results (the run page)."""

    provenance: RunProvenance
    ci_run_url: str | None = Field(
        description="the run's page on GitHub Actions; null for a run GitHub never ran (a "
        "local upload's run id is not one of GitHub's)"
    )
    shards: list[ShardRow]
    worlds: int
    timing_note: str
    results: list[ResultRow]
    matching: int = Field(description="results matching the filter, over all pages")
    page: int
    pages: int
    per_page: int
    outcome_filter: list[str]
    query: str
    sort: Sort


class PullPage(BaseModel):
    report: PullRequestReport
    consistency: ConsistencyResult | None = Field(
        description="file-consistency findings the GitHub bot last published; null if none"
    )
    gate: Gate = Field(
        description="what the check run concludes under `fail_on`: the page's headline colour"
    )
    fail_on: FailOn = Field(description="the gating mode (CPCI_GITHUB_FAIL_ON)")
