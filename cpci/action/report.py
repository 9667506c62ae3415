"""The Action's report mode: the PR comment and the "cpci" check run, from the service's report.

Runs once after every shard has uploaded (the reusable workflow's report job). It does what the
service's bot does on a webhook, with the job's own `GITHUB_TOKEN`, so teams that do not install
a GitHub App still get one comment, edited in place, and a check run that gates the merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from cpci.action.settings import ActionSettings
from cpci.github.auth import TokenAuth
from cpci.github.bot import BotSettings, refresh
from cpci.github.client import GitHubClient
from cpci.github.gate import Gate, gate, is_red
from cpci.upload.envelope import pull_request_event

if TYPE_CHECKING:
    from cpci.server.reports import PullRequestReport

#: The login GitHub shows for comments made with a workflow's GITHUB_TOKEN.
ACTIONS_BOT = "github-actions[bot]"


class ReportError(RuntimeError):
    """The report cannot be published; the message says why and what to do."""


def fetch_report(
    settings: ActionSettings, repo: str, number: int, token: str | None,
    transport: httpx.BaseTransport | None = None,
) -> PullRequestReport | None:  # fmt: skip
    """The service's PR report (None when nothing was uploaded for this PR yet)."""
    from cpci.server.reports import PullRequestReport

    url = f"{settings.server_url.rstrip('/')}/api/v1/repos/{repo}/pulls/{number}/report"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(transport=transport, timeout=60) as http:
            response = http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise ReportError(f"no answer from {url}: {exc}") from exc
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise ReportError(f"{url} answered {response.status_code}: {response.text[:300]}")
    return PullRequestReport.model_validate(response.json())


def run_report(
    settings: ActionSettings, environ: Mapping[str, str], read_token: str | None
) -> tuple[Gate, str]:
    """Publish the comment and check run; returns (gate verdict, the PR page URL)."""
    repo = environ.get("GITHUB_REPOSITORY", "")
    event = pull_request_event(environ)
    number = settings.pull_request or (int(event["number"]) if event else None)
    if not repo or number is None:
        raise ReportError(
            "report mode needs a pull request: run it on pull_request events, or pass the "
            "`pull-request` input (e.g. from a workflow_run job)"
        )
    report_holder: dict[str, PullRequestReport | None] = {}

    def load(repo_: str, number_: int) -> PullRequestReport | None:
        report_holder["report"] = fetch_report(settings, repo_, number_, read_token)
        return report_holder["report"]

    bot = BotSettings(
        comment_mode=settings.comment, fail_on=settings.fail_on, bot_login=ACTIONS_BOT,
        service_url=settings.server_url,
    )  # fmt: skip
    with GitHubClient(TokenAuth(settings.github_token), api_url=_api_url(environ)) as client:
        state = refresh(client, repo, number, settings=bot, load_report=load, previous=None)
    verdict = gate(report_holder.get("report"), state.consistency, settings.fail_on)
    from cpci.server.ui import urls

    return verdict, settings.server_url.rstrip("/") + urls.pull(repo, number)


def _api_url(environ: Mapping[str, str]) -> str:
    return environ.get("GITHUB_API_URL", "https://api.github.com")


def exit_code(verdict: Gate) -> int:
    return 1 if is_red(verdict) else 0
