"""A pull request's page: the full report behind the comment, the file-consistency findings the
GitHub bot stored when it last published (None when it has not), and the gate those give: the
conclusion the check run has, which the page leads with."""

from __future__ import annotations

from sqlmodel import Session

from cpci.github.gate import FailOn, gate
from cpci.schema import PullRequestReport
from cpci.server.crud.github import load_pull_state
from cpci.server.views.read_models import PullPage


def pull_page(*, session: Session, report: PullRequestReport, fail_on: FailOn) -> PullPage:
    """The PR report (built once, for the report endpoint and this page alike), what the bot
    last found of its changed files, and the gate under the service's `fail_on`
    (`CPCI_GITHUB_FAIL_ON`), decided by the check run's own rule."""
    state = load_pull_state(
        session=session, repository=report.repository, number=report.pull_request
    )
    consistency = state.consistency if state else None
    return PullPage(
        report=report,
        consistency=consistency,
        gate=gate(report, consistency, fail_on),
        fail_on=fail_on,
    )
