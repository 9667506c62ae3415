"""`POST /api/v1/uploads`: one shard's `cpci.run/1` envelope, stored whole or not at all."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from starlette.concurrency import run_in_threadpool

from cpci import urls
from cpci.schema import RunEnvelope, UploadReceipt
from cpci.server.api.deps import (
    EngineDep,
    LinksDep,
    PrincipalDep,
    SettingsDep,
    ShardCacheDep,
)
from cpci.server.api.payload import parse_envelope
from cpci.server.core.config import Settings
from cpci.server.core.db import writer
from cpci.server.core.errors import Conflict
from cpci.server.core.metrics import Metrics
from cpci.server.core.provenance import Provenance, check_upload
from cpci.server.core.quotas import UploadRate, check_results_per_upload
from cpci.server.crud.ingest import Ingested, body_sha256, ingest_shard
from cpci.server.crud.pull_report import warm_pull_report
from cpci.server.crud.runs import merge_runs
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.models import Run, utcnow
from cpci.urls import Links

log = logging.getLogger(__name__)
router = APIRouter(prefix="/uploads", tags=["uploads"])

ATTEMPTS = 3
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
    principal: PrincipalDep,
    engine: EngineDep,
    settings: SettingsDep,
    links: LinksDep,
    cache: ShardCacheDep,
) -> UploadReceipt:
    raw = await request.body()  # bounded by CPCI_MAX_UPLOAD_BYTES (api/body_limits.py)
    envelope = await run_in_threadpool(parse_envelope, raw)
    principal.require(envelope.repository)
    provenance = check_upload(principal, envelope, fork_workflows=settings.oidc_fork_workflows)
    check_results_per_upload(len(envelope.results), settings.max_results_per_upload)
    per_hour = settings.max_uploads_per_hour
    rate = UploadRate(per_hour=per_hour, now=utcnow()) if per_hour else None
    metrics: Metrics = request.app.state.metrics
    receipt = await run_in_threadpool(store, engine, envelope, links, provenance, rate)
    if receipt.status == "stored" and receipt.shards.complete:
        await run_in_threadpool(warm, engine, envelope, settings, links, cache)
    metrics.uploads.labels(receipt.status).inc()
    if receipt.status == "stored":
        metrics.results.inc(receipt.results)
    else:
        response.status_code = 200
    return receipt


def store(
    engine: Engine,
    envelope: RunEnvelope,
    links: Links,
    provenance: Provenance,
    rate: UploadRate | None = None,
) -> UploadReceipt:
    """Ingest in one write transaction; retry when a concurrent upload created the same rows.
    `rate` is the repository's hourly upload quota (None: no limit)."""
    digest = body_sha256(envelope)
    for attempt in range(ATTEMPTS):
        try:
            with Session(writer(engine)) as session:
                done = ingest_shard(
                    session=session,
                    envelope=envelope,
                    digest=digest,
                    provenance=provenance,
                    rate=rate,
                )
                receipt = _receipt(session, envelope, done, links)
                session.commit()
                return receipt
        except IntegrityError as exc:
            if attempt == ATTEMPTS - 1:
                raise Conflict(
                    f"shard {envelope.shard_index} of run {envelope.ci_run_id} kept colliding "
                    "with a concurrent upload of the same run: retry"
                ) from exc
    raise AssertionError("not reached")


def warm(
    engine: Engine, envelope: RunEnvelope, settings: Settings, links: Links, cache: ShardCache
) -> None:
    """Build the PR's report read model into the cache once the upload that completed its run
    is committed (a rolled back shard's id could come back for another), before the answer:
    the Action's report job, the bot and reviewers read the report next. Only the last shard of
    a run warms: a head read after each of N shards would cost N reads of a growing head and
    fill the cache with sets nobody reads again (a reader mid-run loads it itself). Branch
    uploads warm nothing: a PR's base is read along with its head. Off with
    CPCI_WARM_PULL_REPORTS=false. The shard is stored whatever happens here, so a failure is
    logged, not answered: the report's first read then loads it itself."""
    if not settings.warm_pull_reports or envelope.pull_request is None:
        return
    try:
        with Session(engine) as session:
            warm_pull_report(
                session=session,
                repository=envelope.repository,
                number=envelope.pull_request,
                commit=envelope.commit,
                settings=settings,
                links=links,
                cache=cache,
            )
    except Exception:  # an optimisation failing must not turn a stored upload into a 500
        log.exception(
            "could not warm the report of %s#%s after an upload; its next read loads it",
            envelope.repository,
            envelope.pull_request,
        )


def _receipt(
    session: Session, envelope: RunEnvelope, done: Ingested, links: Links
) -> UploadReceipt:
    """What was stored: the progress of the run written to (every attempt in its scope)."""
    stored = session.get_one(Run, done.run_id)
    runs = session.exec(
        select(Run).where(
            Run.repository_id == stored.repository_id,
            Run.ci_run_id == envelope.ci_run_id,
            Run.scope == stored.scope,
        )
    ).all()
    merged = merge_runs(session=session, runs=runs)[0]
    return UploadReceipt(
        status=done.status,
        repository=envelope.repository,
        ci_run_id=envelope.ci_run_id,
        ci_attempt=envelope.ci_attempt,
        shard_index=envelope.shard_index,
        leg=envelope.leg,
        results=done.results,
        shards=merged.progress,
        run_api_url=urls.api_run_summary(envelope.repository, envelope.ci_run_id),
        run_url=urls.run(envelope.repository, envelope.ci_run_id),
    )
