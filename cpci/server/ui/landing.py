"""The service's front door, `/`: what a newcomer who opens the service's URL should see.

With public reads, the repositories that uploaded runs, most recently active first, each linking
to its dashboard. With `CPCI_READ_ACCESS=token`, nothing about any repository (not even its
name): a short page saying reads need a token and how to send one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import func
from sqlmodel import Session, col, select

from cpci import urls
from cpci.server.api.deps import PoliciesDep, SessionDep
from cpci.server.models import Repository, Run, as_utc
from cpci.server.ui.routes import render

router = APIRouter(include_in_schema=False)
#: The landing page lists at most this many repositories (the most recently active).
LISTED = 100


@dataclass(frozen=True)
class RepositoryActivity:
    """One repository on the landing page."""

    name: str
    runs: int
    last_run_at: datetime
    dashboard_url: str


def recent_repositories(*, session: Session, limit: int = LISTED) -> list[RepositoryActivity]:
    """Repositories with runs, the most recently active first."""
    last = func.max(col(Run.created_at))
    rows = session.exec(
        select(Repository.name, func.count(col(Run.id)), last)
        .join(Run, col(Run.repository_id) == col(Repository.id))
        .group_by(col(Repository.name))
        .order_by(last.desc(), col(Repository.name))
        .limit(limit)
    ).all()
    return [
        RepositoryActivity(name, runs, as_utc(when), urls.dashboard(name))
        for name, runs, when in rows
    ]


@router.get("/", response_class=HTMLResponse)
def landing(request: Request, session: SessionDep, policies: PoliciesDep) -> HTMLResponse:
    if policies.access.reads == "token":
        return render(request, "landing.html", token_needed=True, repositories=[])
    repositories = recent_repositories(session=session)
    return render(request, "landing.html", token_needed=False, repositories=repositories)
