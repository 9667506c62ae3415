"""JSON twins of the web UI's pages: the same views the HTML renders (`api/view_deps.py`).

The PR page's twin is the PR report with the stored file-consistency findings.
"""

from __future__ import annotations

from fastapi import APIRouter

from cpci.server.api.view_deps import ConfigView, DashboardView, GridView, PullView, RunView
from cpci.server.views.read_models import ConfigOverview, Dashboard, Grid, PullPage, RunDetail
from cpci.urls import API_PREFIX

router = APIRouter(prefix=API_PREFIX + "/repos/{owner}/{repo}", tags=["pages"])


@router.get("/dashboard", summary="Recent runs of a branch, flaky and slow configs, open PRs")
def dashboard(view: DashboardView) -> Dashboard:
    return view


@router.get("/grid", summary="Configs x recent commits of a branch, filtered and paged")
def grid(view: GridView) -> Grid:
    return view


@router.get("/config", summary="One config over time: per commit, timings, failures, runners")
def config(view: ConfigView) -> ConfigOverview:
    return view


@router.get("/runs/{ci_run_id}/detail", summary="A run's shards, worlds, timings and results")
def run(view: RunView) -> RunDetail:
    return view


@router.get("/pulls/{number}/page", summary="The PR report and its file-consistency findings")
def pull(view: PullView) -> PullPage:
    return view
