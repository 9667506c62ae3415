"""A pull request's page: the full report behind the comment, plus the file-consistency
findings the GitHub bot stored when it last published (None when it has not)."""

from __future__ import annotations

from sqlmodel import Session

from cpci.schema import PullRequestReport
from cpci.server.crud.github import load_pull_state
from cpci.server.views.read_models import PullPage


def pull_page(*, session: Session, report: PullRequestReport) -> PullPage:
    """The PR report (built once, for the report endpoint and this page alike) and what the bot
    last found of its changed files."""
    state = load_pull_state(
        session=session, repository=report.repository, number=report.pull_request
    )
    return PullPage(report=report, consistency=state.consistency if state else None)
