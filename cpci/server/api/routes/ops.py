"""Operations endpoints: `/healthz` for load balancers, `/metrics` for Prometheus (behind a
token, any of the service's, when reads need one: its counts span every repository)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from cpci.server.api.deps import EngineDep, require_reader
from cpci.server.core.metrics import Metrics

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="200 when the database answers, 503 when it does not")
def healthz(engine: EngineDep) -> JSONResponse:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return JSONResponse(
            {"status": "unavailable", "database": f"{type(exc).__name__}"}, status_code=503
        )
    return JSONResponse({"status": "ok", "database": engine.dialect.name})


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    dependencies=[Depends(require_reader)],
    responses={401: {"description": "CPCI_READ_ACCESS=token and no valid token"}},
)
def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return Response(generate_latest(registry.registry), media_type=CONTENT_TYPE_LATEST)
