"""JSON twins of the web UI's pages: the same read models the HTML renders.

The PR page's twin is the PR report with the stored file-consistency findings.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cpci.schema import Outcome
from cpci.server.api.deps import (
    LinksDep,
    PullNumber,
    ReadableRepoDep,
    SessionDep,
    SettingsDep,
)
from cpci.server.ui.config_page import config_overview
from cpci.server.ui.dashboard import build_dashboard
from cpci.server.ui.deps import DigestsDep
from cpci.server.ui.models import ConfigOverview, Dashboard, PullPage, RunDetail, Sort
from cpci.server.ui.pull_page import pull_page
from cpci.server.ui.run_page import PER_PAGE, run_detail
from cpci.urls import API_PREFIX

router = APIRouter(prefix=API_PREFIX + "/repos/{owner}/{repo}", tags=["pages"])


@router.get("/dashboard", summary="Recent runs of a branch, flaky and slow configs, open PRs")
def dashboard(
    repository: ReadableRepoDep, session: SessionDep, settings: SettingsDep, links: LinksDep,
    digests: DigestsDep,
    branch: Annotated[str | None, Query(description="default: the most used branch")] = None,
) -> Dashboard:  # fmt: skip
    return build_dashboard(
        session=session, repo=repository, branch=branch, settings=settings, links=links,
        cache=digests,
    )  # fmt: skip


@router.get("/config", summary="One config over time: per commit, timings, failures, runners")
def config(
    repository: ReadableRepoDep, session: SessionDep,
    key: Annotated[str, Query(alias="config", min_length=1, description="NODEID@WORLD_SIZE")],
) -> ConfigOverview:  # fmt: skip
    return config_overview(session=session, repo=repository, key=key)


@router.get("/runs/{ci_run_id}/detail", summary="A run's shards, worlds, timings and results")
def run(
    repository: ReadableRepoDep, session: SessionDep, links: LinksDep, ci_run_id: str,
    outcome: Annotated[list[Outcome], Query()] = [],  # noqa: B006
    q: Annotated[str, Query(max_length=200, description="part of the config id")] = "",
    sort: Sort = "config", page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=1000)] = PER_PAGE,
) -> RunDetail:  # fmt: skip
    return run_detail(
        session=session, repo=repository, ci_run_id=ci_run_id, links=links, outcomes=outcome,
        query=q, sort=sort, page=page, per_page=per_page,
    )  # fmt: skip


@router.get("/pulls/{number}/page", summary="The PR report and its file-consistency findings")
def pull(
    repository: ReadableRepoDep, session: SessionDep, settings: SettingsDep, links: LinksDep,
    number: PullNumber,
) -> PullPage:  # fmt: skip
    return pull_page(
        session=session, repo=repository, number=number, settings=settings, links=links
    )
