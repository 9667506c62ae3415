"""Every request body bounded while it is read: before routing, authentication and parsing.

A body is read before anything can refuse it in two places: FastAPI reads (and `json.loads`)
a route's declared body before it runs the route's dependencies, credentials included, and the
webhook must read its body to check GitHub's signature. Without a bound a stranger's 200 MB body
costs the service a gigabyte before the 401. So one ASGI middleware, outside the app, bounds
every request by its route's limit (`BodyLimits`): a declared Content-Length over it is a 413 at
once, without reading; a streamed body is counted as the app reads it and cut off at the limit
(413); neither is ever buffered beyond it. Routes just read `request.body()`.

Deeply nested JSON is refused cheaply too. The bodies FastAPI parses (every route but uploads
and webhooks, under CPCI_MAX_BODY_BYTES) are checked here once read, by pydantic-core's JSON
parser, which gives up 200 levels down in Rust, before `json.loads` would recurse into them;
uploads and webhooks parse their own bodies with that same parser (`api/payload.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cpci.server.api.payload import check_json_depth
from cpci.server.api.routes.webhooks import GITHUB_PAYLOAD_LIMIT, WEBHOOK_PATH
from cpci.server.core.config import Settings
from cpci.server.core.errors import ApiError, PayloadTooLarge, error_response
from cpci.urls import API_UPLOADS


@dataclass(frozen=True)
class BodyLimit:
    """How much of a body a route reads, what its 413 says, and whether FastAPI parses it
    (then its nesting is checked before the route sees it)."""

    max_bytes: int
    too_large: str
    check_depth: bool


@dataclass(frozen=True)
class BodyLimits:
    """Each route's limit: uploads and webhooks their own, every other route the default (a
    route added later is bounded without a line here)."""

    by_path: dict[str, BodyLimit]
    default: BodyLimit

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyLimits:
        uploads = settings.max_upload_bytes
        webhooks = min(uploads, GITHUB_PAYLOAD_LIMIT)
        return cls(
            by_path={
                API_UPLOADS: BodyLimit(
                    uploads,
                    f"the upload is larger than the server's limit of {uploads} bytes "
                    "(CPCI_MAX_UPLOAD_BYTES): split the results over more shards or raise the "
                    "limit",
                    check_depth=False,
                ),
                WEBHOOK_PATH: BodyLimit(
                    webhooks,
                    f"the delivery is larger than {webhooks} bytes, more than GitHub sends "
                    "(25 MB) or CPCI_MAX_UPLOAD_BYTES allows: check that this URL is only "
                    "GitHub's webhook",
                    check_depth=False,
                ),
            },
            default=BodyLimit(
                settings.max_body_bytes,
                f"the request body is larger than the server's limit of "
                f"{settings.max_body_bytes} bytes for this route (CPCI_MAX_BODY_BYTES): send "
                "less per request (commit ancestry: at most 10,000 links) or raise the limit",
                check_depth=True,
            ),
        )

    def of(self, path: str) -> BodyLimit:
        return self.by_path.get(path, self.default)


class _Refused(Exception):
    """Raised out of `receive` once the body broke its route's limit: stops the app's read."""


@dataclass
class _LimitedBody:
    """The request's `receive`, counting body bytes against `limit` (and, where asked, checking
    the whole body's nesting once it is in)."""

    receive: Receive
    limit: BodyLimit
    seen: int = 0
    chunks: list[bytes] = field(default_factory=list)
    refusal: ApiError | None = None

    async def __call__(self) -> Message:
        message = await self.receive()
        if message["type"] != "http.request":
            return message
        body: bytes = message.get("body", b"")
        self.seen += len(body)
        if self.seen > self.limit.max_bytes:
            self._refuse(PayloadTooLarge(self.limit.too_large))
        if self.limit.check_depth:
            self.chunks.append(body)
            if not message.get("more_body", False):
                try:
                    check_json_depth(b"".join(self.chunks))
                except ApiError as exc:
                    self._refuse(exc)
                self.chunks.clear()
        return message

    def _refuse(self, error: ApiError) -> NoReturn:
        self.refusal = error
        raise _Refused


class BodyLimitMiddleware:
    """Bounds every HTTP request's body by its route's `BodyLimit` (see the module docstring).

    When the limit breaks mid-read, whatever the app makes of the interrupted read (FastAPI
    answers 400, a route raises) is dropped and the refusal is answered instead."""

    def __init__(self, app: ASGIApp, limits: BodyLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.of(scope["path"])
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit.max_bytes:
            await error_response(PayloadTooLarge(limit.too_large))(scope, receive, send)
            return
        body = _LimitedBody(receive, limit)
        started = False

        async def send_unless_refused(message: Message) -> None:
            nonlocal started
            if body.refusal is not None:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, body, send_unless_refused)
        except Exception:
            if body.refusal is None or started:
                raise
        if body.refusal is not None and not started:
            await error_response(body.refusal)(scope, receive, send)
