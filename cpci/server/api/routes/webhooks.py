"""`POST /github/webhook`: GitHub's deliveries, verified, deduplicated, then acted on.

A delivery whose `X-Hub-Signature-256` is missing or wrong is a 401 and nothing is stored. Each
`X-GitHub-Delivery` is acted on once (GitHub redelivers on timeouts). `pull_request` opened,
synchronize or reopened re-checks file consistency and refreshes the comment and check run;
`workflow_run` completed refreshes them with the final verdict. Other events: 202, ignored.
The work runs after the 202 is sent (GitHub gives a delivery 10 s); its outcome is kept on the
delivery row (`done` or `failed` with the reason).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

import httpx
from fastapi import APIRouter, BackgroundTasks, Request, Response
from pydantic import BaseModel
from sqlalchemy import Engine
from sqlmodel import Session, select
from starlette.concurrency import run_in_threadpool

from cpci.github.auth import auth_from
from cpci.github.bot import BotSettings, refresh
from cpci.github.client import GitHubClient
from cpci.github.errors import GitHubError
from cpci.github.webhooks import signature_ok
from cpci.server.api.deps import EngineDep, SettingsDep
from cpci.server.api.payload import read_limited
from cpci.server.core.config import Settings
from cpci.server.core.errors import ApiError, NotFound, Unauthorized, Unavailable
from cpci.server.crud import github as state
from cpci.server.crud.reports import pull_request_report
from cpci.server.links import Links
from cpci.server.models import Repository
from cpci.server.reports import PullRequestReport

router = APIRouter(prefix="/github", tags=["github"])
log = logging.getLogger(__name__)

HANDLED: dict[str, frozenset[str]] = {
    "pull_request": frozenset({"opened", "synchronize", "reopened"}),
    "workflow_run": frozenset({"completed"}),
}


class WebhookReceipt(BaseModel):
    status: Literal["queued", "ignored", "duplicate"]
    delivery: str
    event: str
    action: str | None


@router.post(
    "/webhook",
    status_code=202,
    summary="Receive a GitHub webhook delivery",
    responses={
        200: {"description": "a delivery seen before: not acted on again"},
        401: {"description": "X-Hub-Signature-256 missing or wrong; nothing stored"},
        503: {"description": "the service has no CPCI_GITHUB_WEBHOOK_SECRET"},
    },
)
async def webhook(
    request: Request,
    response: Response,
    background: BackgroundTasks,
    engine: EngineDep,
    settings: SettingsDep,
) -> WebhookReceipt:
    if settings.github_webhook_secret is None:
        raise Unavailable(
            "webhooks are off: set CPCI_GITHUB_WEBHOOK_SECRET to the webhook's secret"
        )
    body = await read_limited(request, settings.max_upload_bytes)
    secret = settings.github_webhook_secret.get_secret_value()
    if not signature_ok(secret, body, request.headers.get("x-hub-signature-256")):
        raise Unauthorized(
            "X-Hub-Signature-256 is missing or does not match: the webhook's secret on GitHub "
            "must equal CPCI_GITHUB_WEBHOOK_SECRET"
        )
    delivery = request.headers.get("x-github-delivery", "")
    event = request.headers.get("x-github-event", "")
    if not delivery or not event:
        raise ApiError("X-GitHub-Delivery and X-GitHub-Event headers are required")
    try:
        payload: Any = json.loads(body)
    except ValueError as exc:
        raise ApiError(f"the delivery body is not JSON: {exc}") from exc
    except RecursionError:
        raise ApiError("the delivery body nests too deeply to be a GitHub event") from None
    if not isinstance(payload, dict):
        raise ApiError("the delivery body is not a JSON object, as every GitHub event is")
    action = payload.get("action")
    handled = action in HANDLED.get(event, frozenset())
    status: Literal["queued", "ignored"] = "queued" if handled else "ignored"
    with Session(engine) as session:
        is_new = await run_in_threadpool(
            state.record_delivery, session=session, delivery_id=delivery, event=event,
            action=action, status=status,
        )  # fmt: skip
    if not is_new:
        response.status_code = 200
        return WebhookReceipt(status="duplicate", delivery=delivery, event=event, action=action)
    if handled:
        transport = getattr(request.app.state, "github_transport", None)
        links: Links = request.app.state.links
        background.add_task(process, engine, settings, links, transport, delivery, event, payload)
    return WebhookReceipt(status=status, delivery=delivery, event=event, action=action)


def process(
    engine: Engine,
    settings: Settings,
    links: Links,
    transport: httpx.BaseTransport | None,
    delivery: str,
    event: str,
    payload: dict[str, Any],
) -> None:
    """Act on a delivery; the outcome is written to its row, never raised."""
    try:
        repo = str(payload["repository"]["full_name"])
        numbers = _pull_requests(engine, event, payload, repo)
        with _client(settings, payload, transport) as client:
            for number in numbers:
                _refresh_one(engine, settings, links, client, repo, number, event)
        status, detail = "done", f"refreshed PR(s) {numbers}" if numbers else "no PR to refresh"
    except (GitHubError, ValueError) as exc:
        log.warning("webhook delivery %s (%s) failed: %s", delivery, event, exc)
        status, detail = "failed", str(exc)
    except (KeyError, TypeError) as exc:  # a payload without the fields its event promises
        log.warning("webhook delivery %s (%s) is malformed: %r", delivery, event, exc)
        status, detail = "failed", f"the {event} payload lacks {exc!r}"
    with Session(engine) as session:
        state.finish_delivery(session=session, delivery_id=delivery, status=status, detail=detail)


def _pull_requests(engine: Engine, event: str, payload: dict[str, Any], repo: str) -> list[int]:
    if event == "pull_request":
        return [int(payload["number"])]
    run = payload["workflow_run"]
    listed = [int(pr["number"]) for pr in run.get("pull_requests") or ()]
    if listed:
        return listed
    with Session(engine) as session:
        return state.pulls_for_commit(session=session, repository=repo, commit=run["head_sha"])


def _client(
    settings: Settings, payload: dict[str, Any], transport: httpx.BaseTransport | None
) -> GitHubClient:
    def secret(value: Any) -> str | None:
        return value.get_secret_value() if value is not None else None

    auth = auth_from(
        token=secret(settings.github_token),
        app_id=settings.github_app_id,
        private_key=secret(settings.github_app_private_key),
        installation_id=(payload.get("installation") or {}).get("id"),
    )
    return GitHubClient(auth, api_url=settings.github_api_url, transport=transport)


def _refresh_one(
    engine: Engine, settings: Settings, links: Links, client: GitHubClient, repo: str,
    number: int, event: str,
) -> None:  # fmt: skip
    def load_report(repository: str, pr: int) -> PullRequestReport | None:
        with Session(engine) as session:
            row = session.exec(select(Repository).where(Repository.name == repository)).first()
            if row is None:
                return None
            try:
                return pull_request_report(
                    session=session, repo=row, number=pr, settings=settings, links=links
                )
            except NotFound:
                return None

    with Session(engine) as session:
        previous = state.load_pull_state(session=session, repository=repo, number=number)
    bot = BotSettings(
        comment_mode=settings.github_comment_mode, fail_on=settings.github_fail_on,
        bot_login=settings.github_bot_login, service_url=settings.public_url,
        rules_path=settings.github_rules_path,
    )  # fmt: skip
    new = refresh(
        client, repo, number, settings=bot, load_report=load_report, previous=previous,
        recheck_files=event == "pull_request",
    )  # fmt: skip
    with Session(engine) as session:
        state.save_pull_state(session=session, repository=repo, number=number, state=new)
