"""A pull request's page: the full report behind the comment, plus the file-consistency
findings the GitHub bot stored when it last published (None when it has not)."""

from __future__ import annotations

from sqlmodel import Session

from cpci.server.core.config import Settings
from cpci.server.crud.github import load_pull_state
from cpci.server.crud.pull_report import pull_request_report
from cpci.server.models import Repository
from cpci.server.shard_cache import ShardCache
from cpci.server.views.read_models import PullPage
from cpci.urls import Links


def pull_page(
    *,
    session: Session,
    repo: Repository,
    number: int,
    settings: Settings,
    links: Links,
    cache: ShardCache,
) -> PullPage:
    report = pull_request_report(
        session=session, repo=repo, number=number, settings=settings, links=links, cache=cache
    )
    state = load_pull_state(session=session, repository=repo.name, number=number)
    return PullPage(report=report, consistency=state.consistency if state else None)
