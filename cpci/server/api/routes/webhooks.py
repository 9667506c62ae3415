"""`POST /github/webhook`: GitHub's deliveries, verified, stored, then worked off by the worker.

A body over GitHub's 25 MB cap (or CPCI_MAX_UPLOAD_BYTES, if lower) is a 413, told from its
Content-Length or cut off while streaming, before the signature is checked (`api/body_limits.py`
bounds the read). A delivery whose
`X-Hub-Signature-256` is missing or wrong is a 401 and nothing is stored. A handled event is
stored with its payload and answered 202 at once; the webhook worker acts on it (see
`cpci.server.webhooks.worker`), so GitHub's 10 s and the request threads are never spent on
GitHub calls. A GUID whose work finished is a duplicate (200); one still queued or failed is
queued again (GitHub's "Redeliver" is how a person retries). A body already stored under
another GUID is a replay (200) and is not acted on again.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel
from pydantic_core import from_json
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from cpci.github.webhooks import signature_ok
from cpci.server.api.deps import EngineDep, SettingsDep
from cpci.server.core.errors import ApiError, Unauthorized, Unavailable
from cpci.server.crud import github as state
from cpci.server.models import utcnow
from cpci.server.webhooks.handling import handles
from cpci.server.webhooks.worker import WebhookWorker

router = APIRouter(tags=["github"])

WEBHOOK_PATH = "/github/webhook"
#: GitHub caps webhook payloads at 25 MB; it never sends more.
GITHUB_PAYLOAD_LIMIT = 25 * 1024 * 1024


class WebhookReceipt(BaseModel):
    status: Literal["queued", "ignored", "duplicate", "replay"]
    delivery: str
    event: str
    action: str | None


@router.post(
    WEBHOOK_PATH,
    status_code=202,
    summary="Receive a GitHub webhook delivery",
    responses={
        200: {"description": "a finished delivery seen before, or a replayed body: not redone"},
        401: {"description": "X-Hub-Signature-256 missing or wrong; nothing stored"},
        413: {"description": "over GitHub's 25 MB payload cap (or CPCI_MAX_UPLOAD_BYTES)"},
        503: {"description": "the service has no CPCI_GITHUB_WEBHOOK_SECRET"},
    },
)
async def webhook(
    request: Request, response: Response, engine: EngineDep, settings: SettingsDep
) -> WebhookReceipt:
    if settings.github_webhook_secret is None:
        raise Unavailable(
            "webhooks are off: set CPCI_GITHUB_WEBHOOK_SECRET to the webhook's secret"
        )
    body = await request.body()
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
    if len(delivery) > 100 or len(event) > 50:
        raise ApiError("X-GitHub-Delivery (a GUID) or X-GitHub-Event is longer than GitHub's")
    payload = _json_object(body)
    raw_action = payload.get("action")
    action = raw_action[:50] if isinstance(raw_action, str) else None  # as long as GitHub's
    handled = handles(event, action)
    with Session(engine) as session:
        receipt = await run_in_threadpool(
            state.record_webhook_delivery,
            session=session,
            delivery_id=delivery,
            event=event,
            action=action,
            status="queued" if handled else "ignored",
            digest=hashlib.sha256(body).hexdigest(),
            payload=payload if handled else None,
            now=utcnow(),
        )
    if receipt in ("duplicate", "replay"):
        response.status_code = 200
        return WebhookReceipt(status=receipt, delivery=delivery, event=event, action=action)
    worker: WebhookWorker | None = getattr(request.app.state, "webhook_worker", None)
    if handled and worker is not None:
        worker.wake()
    status: Literal["queued", "ignored"] = "queued" if handled else "ignored"
    return WebhookReceipt(status=status, delivery=delivery, event=event, action=action)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload: Any = from_json(body)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise ApiError("the delivery body nests too deeply to be a GitHub event") from None
        raise ApiError(f"the delivery body is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise ApiError("the delivery body is not a JSON object, as every GitHub event is")
    return payload
