"""The HTML pages: dashboard, config, run and pull request, each at a stable URL under `/ui`.

Each page renders one read model (the same one its JSON twin in the API returns) and links
to that twin. Everything works without JavaScript: filters are plain GET forms.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from sqlmodel import select

from cpci import urls
from cpci.schema import ATTENTION, Outcome
from cpci.server.api.deps import (
    LinksDep,
    PullNumber,
    ReadableRepoDep,
    SessionDep,
    SettingsDep,
)
from cpci.server.models import Repository
from cpci.server.ui import plots
from cpci.server.ui.config_page import config_overview
from cpci.server.ui.dashboard import build_dashboard
from cpci.server.ui.deps import DigestsDep
from cpci.server.ui.models import Sort
from cpci.server.ui.pull_page import pull_page
from cpci.server.ui.run_page import run_detail
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
def dashboard(
    request: Request, repository: ReadableRepoDep, session: SessionDep, settings: SettingsDep,
    links: LinksDep, digests: DigestsDep, branch: str | None = None,
) -> HTMLResponse:  # fmt: skip
    model = build_dashboard(
        session=session, repo=repository, branch=branch, settings=settings, links=links,
        cache=digests,
    )  # fmt: skip
    return render(
        request, "dashboard.html", page=model, trend=plots.pass_rate_trend(model),
        json_url=urls.api_dashboard(repository.name),
    )  # fmt: skip


@router.get(REPO + "/config", response_class=HTMLResponse)
def config(
    request: Request, repository: ReadableRepoDep, session: SessionDep,
    key: Annotated[str, Query(alias="config", min_length=1)],
) -> HTMLResponse:  # fmt: skip
    model = config_overview(session=session, repo=repository, key=key)
    return render(
        request, "config.html", page=model, timeline=plots.timeline(model),
        durations=plots.duration_plot(model), metrics=plots.metric_plots(model),
        json_url=urls.api_config(repository.name, key),
    )  # fmt: skip


@router.get(REPO + "/runs/{ci_run_id}", response_class=HTMLResponse)
def run(
    request: Request, repository: ReadableRepoDep, session: SessionDep, links: LinksDep,
    ci_run_id: str, outcome: Annotated[list[Outcome], Query()] = [],  # noqa: B006
    q: Annotated[str, Query(max_length=200)] = "", sort: Sort = "config",
    page: Annotated[int, Query(ge=1)] = 1,
) -> HTMLResponse:  # fmt: skip
    model = run_detail(
        session=session, repo=repository, ci_run_id=ci_run_id, links=links, outcomes=outcome,
        query=q, sort=sort, page=page,
    )  # fmt: skip
    return render(
        request, "run.html", page=model, json_url=urls.api_run_detail(repository.name, ci_run_id)
    )


@router.get(REPO + "/pulls/{number}", response_class=HTMLResponse)
def pull(
    request: Request, repository: ReadableRepoDep, session: SessionDep, settings: SettingsDep,
    links: LinksDep, number: PullNumber,
) -> HTMLResponse:  # fmt: skip
    model = pull_page(
        session=session, repo=repository, number=number, settings=settings, links=links
    )
    report = model.report
    sections = [(name, getattr(report, _FIELD.get(name, name))) for name in ATTENTION]
    return render(
        request, "pull.html", page=report, sections=sections, consistency=model.consistency,
        json_url=urls.api_pull_page(repository.name, number),
    )  # fmt: skip


#: Verdict name -> the report's field holding that section.
_FIELD = {"new_failure": "new_failures"}
