"""The HTML pages: dashboard, config, run and pull request, each at a stable URL under `/ui`.

Each page renders one read model (the same one its JSON twin in the API returns) and links
to that twin. Everything works without JavaScript: filters are plain GET forms.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import select

from cpci import urls
from cpci.schema import ATTENTION
from cpci.schema.verdicts import info
from cpci.server.api.deps import SessionDep
from cpci.server.api.view_deps import (
    ConfigView,
    DashboardView,
    GridView,
    PullSectionView,
    PullView,
    RunView,
)
from cpci.server.models import Repository
from cpci.server.ui import plots
from cpci.server.ui.templating import make_templates

router = APIRouter(prefix=urls.UI_PREFIX, include_in_schema=False)
templates = make_templates()
REPO = "/{owner}/{repo}"


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep) -> HTMLResponse:
    names = session.exec(select(Repository.name).order_by(Repository.name)).all()
    return render(request, "index.html", repositories=names)


@router.get(REPO, response_class=HTMLResponse)
def dashboard(request: Request, view: DashboardView) -> HTMLResponse:
    return render(
        request,
        "dashboard.html",
        page=view,
        trend=plots.pass_rate_trend(view),
        json_url=urls.api_dashboard(view.repository),
    )


@router.get(REPO + "/grid", response_class=HTMLResponse)
def grid(request: Request, view: GridView) -> HTMLResponse:
    return render(
        request,
        "grid.html",
        page=view,
        json_url=urls.api_grid(view.repository, view.branch),
    )


@router.get(REPO + "/config", response_class=HTMLResponse)
def config(request: Request, view: ConfigView) -> HTMLResponse:
    return render(
        request,
        "config.html",
        page=view,
        timeline=plots.timeline(view),
        durations=plots.duration_plot(view),
        metrics=plots.metric_plots(view),
        json_url=urls.api_config(view.repository, view.config),
    )


@router.get(REPO + "/runs/{ci_run_id}", response_class=HTMLResponse)
def run(request: Request, view: RunView) -> HTMLResponse:
    json_url = urls.api_run_detail(view.repository, view.run.ci_run_id)
    return render(request, "run.html", page=view, json_url=json_url)


@router.get(REPO + "/pulls/{number}", response_class=HTMLResponse)
def pull(request: Request, view: PullView) -> HTMLResponse:
    report = view.report
    sections = [(name, getattr(report, info(name).field)) for name in ATTENTION]
    return render(
        request,
        "pull.html",
        page=report,
        sections=sections,
        consistency=view.consistency,
        gate=view.gate,
        fail_on=view.fail_on,
        json_url=urls.api_pull_page(report.repository, report.pull_request),
    )


@router.get(REPO + "/pulls/{number}/sections/{section}", response_class=HTMLResponse)
def pull_section(request: Request, view: PullSectionView) -> HTMLResponse:
    """A page of a PR report's section past the PR page's cap (see `crud.pull_report`)."""
    json_url = urls.api_pull_report_section(
        view.repository, view.pull_request, view.section, view.offset
    )
    return render(request, "pull_section.html", page=view, json_url=json_url)
