"""A page of a PR report's section as a dependency: the API route and the UI page past the
PR page's cap take it from here, so they accept the same parameters and show the same items."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from cpci.schema import INT32_MAX, ReportSectionName, ReportSectionPage
from cpci.server.api.deps import (
    LinksDep,
    PullNumber,
    ReadableRepoDep,
    SessionDep,
    SettingsDep,
    ShardCacheDep,
)
from cpci.server.crud.pull_report import pull_request_section

#: The most items one page of a section holds.
MAX_PAGE = 1000


def pull_section_view(
    repository: ReadableRepoDep,
    session: SessionDep,
    settings: SettingsDep,
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
        limit=limit or settings.report_section_cap,
        settings=settings,
        links=links,
        cache=cache,
    )


PullSectionView = Annotated[ReportSectionPage, Depends(pull_section_view)]
