"""`POST /api/v1/uploads`: one shard's `cpci.run/1` envelope, stored whole or not at all."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from cpci.schema import UploadReceipt
from cpci.server.api.deps import (
    CredentialDep,
    EngineDep,
    LinksDep,
    PoliciesDep,
    ShardCacheDep,
)
from cpci.server.api.payload import parse_envelope
from cpci.server.core.metrics import Metrics
from cpci.server.core.provenance import check_upload
from cpci.server.crud.uploads import store_upload

router = APIRouter(prefix="/uploads", tags=["uploads"])

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "unsupported schema version (the supported ones are named)"},
    401: {"description": "missing or invalid credentials"},
    403: {
        "description": "the credentials are for another repository, or may not claim this "
        "branch / pull request, CI run or commit, or a pull request's upload names a branch "
        "run's CI run id (the rule is named)"
    },
    409: {"description": "this shard was already uploaded with a different body"},
    413: {
        "description": "the body is over CPCI_MAX_UPLOAD_BYTES, or holds more results than "
        "CPCI_MAX_RESULTS_PER_UPLOAD"
    },
    422: {"description": "the body does not match the schema; each error has its field path"},
    429: {
        "description": "the repository stored CPCI_MAX_UPLOADS_PER_HOUR uploads in the last "
        "hour; retry after the seconds in Retry-After",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    },
}


@router.post(
    "",
    status_code=201,
    response_model=UploadReceipt,
    summary="Upload one shard's results",
    description="Idempotent: the same shard uploaded again returns 200 `duplicate` and stores "
    "nothing; a different body for an uploaded shard is a 409.",
    responses={200: {"description": "already stored (duplicate)"}, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/RunEnvelope"}}
            },
        }
    },
)
async def upload(
    request: Request,
    response: Response,
    credential: CredentialDep,
    engine: EngineDep,
    policies: PoliciesDep,
    links: LinksDep,
    cache: ShardCacheDep,
) -> UploadReceipt:
    raw = await request.body()  # bounded by CPCI_MAX_UPLOAD_BYTES (api/body_limits.py)
    envelope = await run_in_threadpool(parse_envelope, raw)
    credential.require(envelope.repository)
    uploads = policies.uploads
    provenance = check_upload(credential, envelope, fork_workflows=uploads.fork_workflows)
    receipt = await run_in_threadpool(
        lambda: store_upload(
            engine=engine,
            envelope=envelope,
            provenance=provenance,
            policy=uploads,
            report_policy=policies.pull_report,
            quarantine=policies.quarantine,
            links=links,
            cache=cache,
        )
    )
    metrics: Metrics = request.app.state.metrics
    metrics.uploads.labels(receipt.status).inc()
    if receipt.status == "stored":
        metrics.results.inc(receipt.results)
    else:
        response.status_code = 200
    return receipt
