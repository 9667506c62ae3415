"""The ingest API's one exception tree, turned into JSON responses in one place.

Every error body is `{"detail": ..., "code": ...}`: `detail` says what went wrong and what to do
next, `code` is stable for machines. Database outages become 503 (retry), never a bare 500.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError


class FieldError(BaseModel):
    path: str
    loc: list[int | str]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error response: what went wrong and what to do (`detail`), a stable `code`, and for
    422 each offending field with its path."""

    detail: str
    code: str
    errors: list[FieldError] | None = None


#: Documented on every route, so the OpenAPI schema describes the bodies clients really get
#: (FastAPI would otherwise document its own 422 shape).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "invalid input; `errors` names each field's path"},
}


class ApiError(Exception):
    """An error the client can act on; `status` is the HTTP status it becomes."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class UnsupportedSchema(ApiError):
    status, code = 400, "unsupported_schema"


class Unavailable(ApiError):
    status, code = 503, "unavailable"


class InvalidPayload(ApiError):
    """Schema errors, each with the dotted path of the offending field."""

    status, code = 422, "invalid_payload"

    def __init__(self, errors: Sequence[dict[str, Any]]) -> None:
        self.errors = [_describe(e) for e in errors]
        first = self.errors[0] if self.errors else {"path": "", "msg": "invalid"}
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        super().__init__(f"{first['path'] or 'body'}: {first['msg']}{more}")


def field_path(loc: Sequence[int | str]) -> str:
    """`("results", 3, "outcome")` -> `results[3].outcome`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _describe(error: dict[str, Any]) -> dict[str, Any]:
    loc = [p for p in error.get("loc", ()) if isinstance(p, int | str)]
    return {"path": field_path(loc), "loc": loc, "msg": error.get("msg", ""), "type": error["type"]}


def error_response(exc: ApiError) -> JSONResponse:
    """The JSON body an ApiError becomes, from a handler or from outside the app (the body
    limit answers before any route runs)."""
    body: dict[str, Any] = {"detail": exc.detail, "code": exc.code}
    if isinstance(exc, InvalidPayload):
        body["errors"] = exc.errors
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def install(app: FastAPI) -> None:
    """Register the handlers that turn errors into the JSON bodies described above."""

    async def api_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def request_invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return await api_error(request, InvalidPayload(list(exc.errors())))

    async def database_down(request: Request, exc: Exception) -> JSONResponse:
        return await api_error(
            request, Unavailable(f"the database is unavailable ({type(exc).__name__}); retry")
        )

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, request_invalid)
    app.add_exception_handler(OperationalError, database_down)
