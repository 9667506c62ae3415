"""The Action's report mode: the PR comment and the "cpci" check run, from the service's report.

Runs once after every shard has uploaded (the reusable workflow's report job). It does what the
service's bot does on a webhook, with the job's own `GITHUB_TOKEN`, so teams that do not install
a GitHub App still get one comment, edited in place, and a check run that gates the merge.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from cpci import urls
from cpci.action.settings import ActionSettings
from cpci.github.auth import TokenAuth
from cpci.github.bot import BotSettings, refresh
from cpci.github.client import GitHubClient
from cpci.github.gate import Gate, gate, is_red
from cpci.schema import PullRequestReport
from cpci.upload.envelope import pull_request_event
from cpci.upload.errors import UploadFailed
from cpci.upload.service_client import ServiceClient

#: The login GitHub shows for comments made with a workflow's GITHUB_TOKEN.
ACTIONS_BOT = "github-actions[bot]"


class ReportModeError(RuntimeError):
    """The report cannot be published; the message says why and what to do."""


def fetch_pull_request_report(
    settings: ActionSettings,
    repo: str,
    number: int,
    token: str | None,
    transport: httpx.BaseTransport | None = None,
) -> PullRequestReport | None:
    """The service's PR report (None when nothing was uploaded for this PR yet)."""
    client = ServiceClient(settings.server_url, token, transport=transport)
    try:
        return client.pull_report(repo, number)
    except UploadFailed as exc:
        raise ReportModeError(str(exc)) from exc


def run_report_mode(
    settings: ActionSettings, environ: Mapping[str, str], read_token: str | None
) -> tuple[Gate, str]:
    """Publish the comment and check run; returns (gate verdict, the PR page URL)."""
    repo = environ.get("GITHUB_REPOSITORY", "")
    event = pull_request_event(environ)
    number = settings.pull_request or (int(event["number"]) if event else None)
    if not repo or number is None:
        raise ReportModeError(
            "report mode needs a pull request: run it on pull_request events, or pass the "
            "`pull-request` input (e.g. from a workflow_run job)"
        )
    loaded: list[PullRequestReport | None] = []

    def load(repo_: str, number_: int) -> PullRequestReport | None:
        loaded.append(fetch_pull_request_report(settings, repo_, number_, read_token))
        return loaded[-1]

    bot = BotSettings(
        comment_mode=settings.comment,
        fail_on=settings.fail_on,
        bot_login=ACTIONS_BOT,
        service_url=settings.server_url,
    )
    with GitHubClient(TokenAuth(settings.github_token), api_url=_api_url(environ)) as client:
        state = refresh(client, repo, number, settings=bot, load_report=load, previous=None)
    verdict = gate(loaded[-1] if loaded else None, state.consistency, settings.fail_on)
    return verdict, settings.server_url.rstrip("/") + urls.pull(repo, number)


def _api_url(environ: Mapping[str, str]) -> str:
    return environ.get("GITHUB_API_URL", "https://api.github.com")


def exit_code(verdict: Gate) -> int:
    """The step's exit code: 1 turns the job red, as the check run is."""
    return 1 if is_red(verdict) else 0
