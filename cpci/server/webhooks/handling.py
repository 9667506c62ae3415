"""Acting on one stored webhook delivery: which PRs it concerns, then the bot's refresh of each.

Runs on the webhook worker's thread, never on a request thread. `pull_request` and
`pull_request_review` events re-check file consistency (and so the acknowledgements: labels, body
edits, approving reviews; a `labeled` delivery's sender is one who added the label, see
`cpci.github.acks`) and refresh the comment and check run; `workflow_run` completed
refreshes them with the final verdict. The outcome says whether trying again later could help
(GitHub down or rate limited) or not (a payload without its fields, a token that may not
comment).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from sqlalchemy import Engine, text
from sqlmodel import Session, select

from cpci.github.acks import label_senders
from cpci.github.auth import auth_from
from cpci.github.bot import BotSettings, refresh
from cpci.github.client import GitHubClient
from cpci.github.errors import GitHubError, RateLimited, ServerError, Unreachable
from cpci.github.retry import RetryPolicy
from cpci.schema import PullRequestReport
from cpci.server.core.config import Settings
from cpci.server.core.errors import NotFound
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud import github as state
from cpci.server.crud.github import QueuedWebhookDelivery
from cpci.server.crud.pull_report import pull_request_report
from cpci.server.crud.repos import remember_default_branch
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.models import Repository
from cpci.urls import Links

log = logging.getLogger(__name__)

#: The events and actions the bot acts on; any other delivery is stored as `ignored`.
HANDLED: dict[str, frozenset[str]] = {
    "pull_request": frozenset(
        {"opened", "synchronize", "reopened", "edited", "labeled", "unlabeled"}
    ),
    "pull_request_review": frozenset({"submitted", "edited", "dismissed"}),
    "workflow_run": frozenset({"completed"}),
}
#: Events after which the file-consistency findings (and their acks) are checked again.
RECHECKS = frozenset({"pull_request", "pull_request_review"})
#: Failures that may pass by themselves: worth another attempt after a backoff.
TRANSIENT = (Unreachable, ServerError, RateLimited)
#: The GitHub client's own retries stay short: the worker's backoff handles long outages, so one
#: delivery never holds the worker for a 15-minute rate-limit wait.
WORKER_RETRY = RetryPolicy(attempts=3, max_backoff_s=5.0, max_wait_s=30.0)


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended; `retryable` failures are queued again."""

    status: str  # "done" or "failed"
    detail: str
    retryable: bool = False


@dataclass(frozen=True)
class GitHubAccess:
    """How the bot reaches GitHub (a token, or a GitHub App's id and key; the API's URL) and
    how it publishes (`bot`; its `bot_login` None until GitHub is asked, unless
    CPCI_GITHUB_BOT_LOGIN names it)."""

    api_url: str
    bot: BotSettings
    token: str | None = None
    app_id: str | None = None
    private_key: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> GitHubAccess:
        def secret(value: Any) -> str | None:
            return value.get_secret_value() if value is not None else None

        return cls(
            api_url=settings.github_api_url,
            bot=BotSettings(
                comment_mode=settings.github_comment_mode,
                fail_on=settings.github_fail_on,
                bot_login=settings.github_bot_login or None,
                service_url=settings.public_url,
                rules_path=settings.github_rules_path,
            ),
            token=secret(settings.github_token),
            app_id=settings.github_app_id,
            private_key=secret(settings.github_app_private_key),
        )


@dataclass(frozen=True)
class WebhookContext:
    """What acting on a delivery needs from the app: its database, its GitHub access, the PR
    report's policy, links and cache."""

    engine: Engine
    github: GitHubAccess
    policy: PullReportPolicy
    links: Links
    shard_cache: ShardCache
    transport: httpx.BaseTransport | None = None
    github_retry: RetryPolicy = WORKER_RETRY
    #: The bot's login as GitHub told it, when the settings do not say (asked once per kind of
    #: credential, not once per delivery).
    logins: dict[str, str] = field(default_factory=dict)

    def bot_login(self, client: GitHubClient) -> str:
        """CPCI_GITHUB_BOT_LOGIN, else what GitHub says the credentials are."""
        if self.github.bot.bot_login:
            return self.github.bot.bot_login
        kind = "app" if self.github.app_id else "token"
        if kind not in self.logins:
            self.logins[kind] = client.bot_login()
        return self.logins[kind]


def handles(event: str, action: Any) -> bool:
    """Whether the bot acts on this event and action."""
    return action in HANDLED.get(event, frozenset())


def handle_webhook_delivery(context: WebhookContext, delivery: QueuedWebhookDelivery) -> Outcome:
    """Act on `delivery`; failures come back as an `Outcome`, never raised."""
    event, payload = delivery.event, delivery.payload
    try:
        repo = str(payload["repository"]["full_name"])
        _remember_default_branch(context.engine, repo, payload["repository"])
        numbers = _pull_requests(context.engine, event, payload, repo)
        with _client(context, payload) as client:
            for number in numbers:
                _refresh_one(context, client, repo, number, event, label_senders(event, payload))
    except TRANSIENT as exc:
        log.warning(
            "webhook delivery %s (%s) will be retried: %s", delivery.delivery_id, event, exc
        )
        return Outcome("failed", str(exc), retryable=True)
    except (GitHubError, ValueError) as exc:
        log.warning("webhook delivery %s (%s) failed: %s", delivery.delivery_id, event, exc)
        return Outcome("failed", str(exc))
    except (KeyError, TypeError) as exc:  # a payload without the fields its event promises
        log.warning("webhook delivery %s (%s) is malformed: %r", delivery.delivery_id, event, exc)
        return Outcome("failed", f"the {event} payload lacks {exc!r}")
    return Outcome("done", f"refreshed PR(s) {numbers}" if numbers else "no PR to refresh")


def _remember_default_branch(engine: Engine, repo: str, repository: dict[str, Any]) -> None:
    """The repository's default branch, as GitHub reports it, decides which branch is trusted
    (unless CPCI_TRUSTED_BRANCHES says otherwise)."""
    branch = repository.get("default_branch")
    if not isinstance(branch, str) or not branch:
        return
    with Session(engine) as session:
        remember_default_branch(session=session, name=repo, branch=branch)
        session.commit()


def _pull_requests(engine: Engine, event: str, payload: dict[str, Any], repo: str) -> list[int]:
    if event == "pull_request":
        return [int(payload["number"])]
    if event == "pull_request_review":
        return [int(payload["pull_request"]["number"])]
    run = payload["workflow_run"]
    listed = [int(pr["number"]) for pr in run.get("pull_requests") or ()]
    if listed:
        return listed
    with Session(engine) as session:
        return state.pulls_for_commit(session=session, repository=repo, commit=run["head_sha"])


def _client(context: WebhookContext, payload: dict[str, Any]) -> GitHubClient:
    github = context.github
    auth = auth_from(
        token=github.token,
        app_id=github.app_id,
        private_key=github.private_key,
        installation_id=(payload.get("installation") or {}).get("id"),
    )
    return GitHubClient(
        auth,
        api_url=github.api_url,
        transport=context.transport,
        retry=context.github_retry,
    )


def _refresh_one(
    context: WebhookContext,
    client: GitHubClient,
    repo: str,
    number: int,
    event: str,
    labelled_by: dict[str, str],
) -> None:
    engine = context.engine

    def load_report(repository: str, pr: int) -> PullRequestReport | None:
        with Session(engine) as session:
            row = session.exec(select(Repository).where(Repository.name == repository)).first()
            if row is None:
                return None
            try:
                return pull_request_report(
                    session=session,
                    repo=row,
                    number=pr,
                    policy=context.policy,
                    links=context.links,
                    cache=context.shard_cache,
                )
            except NotFound:
                return None

    bot = replace(context.github.bot, bot_login=context.bot_login(client))
    # Another replica's worker may be refreshing this PR now: from reading what was published
    # to saving what is, one at a time, or both would create a check run (and a comment).
    with pull_request_lock(engine, repo, number):
        with Session(engine) as session:
            previous = state.load_pull_state(session=session, repository=repo, number=number)
        new = refresh(
            client,
            repo,
            number,
            settings=bot,
            load_report=load_report,
            previous=previous,
            recheck_files=event in RECHECKS,
            labelled_by=labelled_by,
        )
        with Session(engine) as session:
            state.save_pull_state(session=session, repository=repo, number=number, state=new)


def lock_key(repository: str, number: int) -> int:
    """The PR's advisory lock key: 64 bits of a hash, as PostgreSQL's signed bigint."""
    digest = hashlib.sha256(f"{repository}#{number}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def pull_request_lock(engine: Engine, repository: str, number: int) -> Iterator[None]:
    """Hold the PR's refresh lock for the block, waiting while another replica holds it.

    Two deliveries for one PR claimed by two replicas' workers at once would each read what
    was published (`GitHubPullState`), find no check run yet and create one (and a comment,
    where both list the PR's comments before either posts). On PostgreSQL this is a
    transaction-level advisory lock on a key hashed from the repository and number, on a
    connection of its own: released at the end of the block, and by the server when a
    replica dies holding it. SQLite serves one process, whose one worker refreshes PRs one
    at a time: no lock is taken."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.begin() as connection:
        connection.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(repository, number)}
        )
        yield
