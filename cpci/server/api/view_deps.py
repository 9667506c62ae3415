"""Each page's view as a dependency: its query parameters declared once, for both renderings.

A page's JSON twin (`api/routes/pages.py`) returns the view and its HTML page (`ui/routes.py`)
renders it; both take the view from here, so the two cannot drift apart in what they accept or
what they show. The PR report's endpoint (`api/routes/repos.py`) and the PR page share
`PullReportView`; a page of a report section past the PR page's cap (API and UI) is
`PullSectionView`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from cpci.schema import INT32_MAX, Outcome, PullRequestReport, ReportSectionName, ReportSectionPage
from cpci.server.api.deps import (
    LinksDep,
    PoliciesDep,
    PullNumber,
    PullReportPolicyDep,
    ReadableRepoDep,
    SessionDep,
    SettingsDep,
    ShardCacheDep,
)
from cpci.server.crud.pull_report import pull_request_report, pull_request_section
from cpci.server.views import grid
from cpci.server.views.config_overview import config_overview
from cpci.server.views.config_triage import config_triage
from cpci.server.views.dashboard import build_dashboard
from cpci.server.views.grid import GridFilter, build_grid
from cpci.server.views.pull_page import pull_page
from cpci.server.views.read_models import (
    ConfigOverview,
    Dashboard,
    Grid,
    GridMark,
    GridState,
    GridVerdict,
    PullPage,
    RunDetail,
    Sort,
)
from cpci.server.views.run import PER_PAGE, run_detail


def dashboard_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    cache: ShardCacheDep,
    branch: Annotated[str | None, Query(description="default: the most used branch")] = None,
) -> Dashboard:
    return build_dashboard(
        session=session, repo=repository, branch=branch, policy=policy, links=links, cache=cache
    )


def grid_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    cache: ShardCacheDep,
    branch: Annotated[str | None, Query(description="default: the most used branch")] = None,
    commits: Annotated[
        int, Query(ge=1, le=grid.MAX_COMMITS, description="columns: commits")
    ] = grid.COMMITS,
    q: Annotated[str, Query(max_length=200, description="part of the config id")] = "",
    param: Annotated[
        str, Query(max_length=200, description="terms, each part of some name=value")
    ] = "",
    outcome: Annotated[
        list[GridState], Query(description="rows with a cell in one of these states")
    ] = [],  # noqa: B006
    verdict: Annotated[
        list[GridVerdict | GridMark], Query(description="rows with one of these verdicts")
    ] = [],  # noqa: B006
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=grid.MAX_PER_PAGE)] = grid.PER_PAGE,
) -> Grid:
    return build_grid(
        session=session,
        repo=repository,
        branch=branch,
        policy=policy,
        links=links,
        cache=cache,
        commits=commits,
        where=GridFilter(query=q, param=param, outcomes=outcome, verdicts=verdict),
        page=page,
        per_page=per_page,
    )


def config_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    policies: PoliciesDep,
    links: LinksDep,
    key: Annotated[str, Query(alias="config", min_length=1, description="NODEID@WORLD_SIZE")],
) -> ConfigOverview:
    overview = config_overview(session=session, repo=repository, key=key)
    triage = config_triage(
        session=session,
        repo=repository,
        key=key,
        report_policy=policies.pull_report,
        policy=policies.quarantine,
        links=links,
    )
    return overview.model_copy(update={"triage": triage})


def run_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    links: LinksDep,
    ci_run_id: str,
    outcome: Annotated[list[Outcome], Query()] = [],  # noqa: B006
    q: Annotated[str, Query(max_length=200, description="part of the config id")] = "",
    sort: Sort = "config",
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=1000)] = PER_PAGE,
) -> RunDetail:
    return run_detail(
        session=session,
        repo=repository,
        ci_run_id=ci_run_id,
        links=links,
        outcomes=outcome,
        query=q,
        sort=sort,
        page=page,
        per_page=per_page,
    )


def pull_report_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    cache: ShardCacheDep,
    number: PullNumber,
) -> PullRequestReport:
    return pull_request_report(
        session=session,
        repo=repository,
        number=number,
        policy=policy,
        links=links,
        cache=cache,
    )


PullReportView = Annotated[PullRequestReport, Depends(pull_report_view)]


def pull_view(report: PullReportView, session: SessionDep, settings: SettingsDep) -> PullPage:
    return pull_page(session=session, report=report, fail_on=settings.github_fail_on)


DashboardView = Annotated[Dashboard, Depends(dashboard_view)]
ConfigView = Annotated[ConfigOverview, Depends(config_view)]
GridView = Annotated[Grid, Depends(grid_view)]
RunView = Annotated[RunDetail, Depends(run_view)]
PullView = Annotated[PullPage, Depends(pull_view)]


#: The most items one page of a section holds.
MAX_PAGE = 1000


def pull_section_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    policy: PullReportPolicyDep,
    links: LinksDep,
    cache: ShardCacheDep,
    number: PullNumber,
    section: ReportSectionName,
    offset: Annotated[int, Query(ge=0, le=INT32_MAX, description="items to skip")] = 0,
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_PAGE, description="items per page (the report's cap)")
    ] = None,
) -> ReportSectionPage:
    return pull_request_section(
        session=session,
        repo=repository,
        number=number,
        section=section,
        offset=offset,
        limit=limit or policy.judge.section_cap,
        policy=policy,
        links=links,
        cache=cache,
    )


PullSectionView = Annotated[ReportSectionPage, Depends(pull_section_view)]
