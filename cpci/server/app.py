"""`create_app(settings)`: the whole service, built from one settings object.

Nothing is read from the environment here, so tests build apps with their own settings and
databases side by side. The settings are read here, once: into the policies every route hands
down (`app.state.policies`, `core.policies.ServicePolicies`), the body limits, the OIDC
verifier and the webhook worker. Routers are modular: API v1, operations, the pages' JSON
twins, the web UI and the GitHub webhook route mount side by side.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from sqlalchemy import Engine

from cpci import __version__
from cpci.schema import RunEnvelope
from cpci.server.api import api_router, ops_router
from cpci.server.api.body_limits import BodyLimitMiddleware, BodyLimits
from cpci.server.api.routes import pages, webhooks
from cpci.server.compaction import CompactionJob
from cpci.server.core import errors
from cpci.server.core.config import Settings
from cpci.server.core.db import create_db_engine
from cpci.server.core.metrics import Metrics, MetricsMiddleware
from cpci.server.core.oidc import OidcVerifier
from cpci.server.core.policies import ServicePolicies
from cpci.server.crud.prime import prime_pull_reports
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.ui import install_ui
from cpci.server.webhooks.handling import GitHubAccess, WebhookContext, handle_webhook_delivery
from cpci.server.webhooks.worker import WebhookWorker, WorkerPolicy
from cpci.urls import Links

log = logging.getLogger(__name__)

#: The cycle collector's first threshold while serving (CPython's: 700 container objects).
#: An upload of 5,000 results validates into ~27,000 containers (models, their dicts, lists)
#: that live until its rows are written. At 700, young passes move them to the old generation
#: fast enough for a full pass every ~70,000 allocations, and a full pass walks every live
#: object: 16 uploads at once hold ~400,000, ~0.1 s a pass, several per 80,000 results. At
#: 50,000 (the other two thresholds kept) a full pass comes every ~5,000,000 allocations: the
#: service's CPU per 80,000 results fell by a fifth (benchmarks/ingest.py). Garbage in cycles
#: is still collected, later; an upload's objects are freed by reference counting.
GC_YOUNG_THRESHOLD = 50_000


def create_app(
    settings: Settings,
    *,
    engine: Engine | None = None,
    oidc_http: httpx.Client | None = None,
    webhook_policy: WorkerPolicy | None = None,
    read_engine: Engine | None = None,
) -> FastAPI:
    """The ASGI app. `engine`, `read_engine`, `oidc_http` and the webhook worker's retry policy
    may be injected (tests); else made from settings (`CPCI_WEBHOOK_*` for the policy). GET and
    HEAD requests read through `read_engine` (CPCI_DATABASE_READ_URL, default: `engine`);
    uploads, webhooks, the worker and start-up priming use `engine`, the primary."""
    own_engine = engine is None
    engine = engine or create_db_engine(settings.database_url)
    own_read_engine = read_engine is None and settings.database_read_url is not None
    if read_engine is None:
        read_url = settings.database_read_url
        read_engine = create_db_engine(read_url) if read_url is not None else engine
    own_http = oidc_http is None and settings.oidc_enabled
    http = oidc_http or (httpx.Client() if settings.oidc_enabled else None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        log.log(
            logging.WARNING if settings.oidc_allow_any_repository else logging.INFO,
            settings.oidc_stance(),
        )
        # Before serving, so the first report read after a restart finds its PR's read models
        # (CPCI_WARM_ON_START_*); before the freeze, so what it read is left out of full passes.
        prime_pull_reports(
            engine=engine,
            priming=policies.priming,
            policy=policies.pull_report,
            links=_app.state.links,
            cache=_app.state.shard_cache,
        )
        # What is alive when serving starts (modules, routes, the engine) lives as long as the
        # process: keep it out of the cycle collector's full passes, which an upload or report
        # (tens of thousands of objects) otherwise triggers, rescanning all of it each time.
        gc.freeze()
        collecting = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *collecting[1:])
        worker = _webhook_worker(_app, settings, policies, engine, webhook_policy)
        compaction = _compaction_job(_app, settings, engine)
        yield
        if compaction is not None:
            compaction.stop()
        if worker is not None:
            worker.stop()
        if own_http and http is not None:
            http.close()
        if own_engine:
            engine.dispose()
        if own_read_engine:
            read_engine.dispose()
        gc.set_threshold(*collecting)

    app = FastAPI(
        title="cpci result service",
        version=__version__,
        description="Stores per-config results of distributed GPU test runs and turns them into "
        "verdicts: new failures, broken at base, flaky (with evidence), infra, fixed.",
        lifespan=lifespan,
    )
    metrics = Metrics()
    policies = ServicePolicies.from_settings(settings)
    app.state.settings = settings
    app.state.policies = policies
    app.state.engine = engine
    app.state.read_engine = read_engine
    app.state.metrics = metrics
    app.state.links = Links(settings.github_url, settings.public_url)
    app.state.shard_cache = ShardCache()
    audience = settings.oidc_token_audience
    app.state.oidc = (
        OidcVerifier(
            jwks_url=settings.oidc_jwks_url,
            issuer=settings.oidc_issuer,
            audience=audience,
            http=http,
            cache_s=settings.oidc_jwks_cache_s,
        )
        if audience is not None and http is not None
        else None
    )
    errors.install(app)
    app.include_router(ops_router, responses=errors.ERROR_RESPONSES)
    app.include_router(api_router, responses=errors.ERROR_RESPONSES)
    app.include_router(pages.router, responses=errors.ERROR_RESPONSES)
    install_ui(app)
    app.include_router(webhooks.router, responses=errors.ERROR_RESPONSES)
    app.add_middleware(BodyLimitMiddleware, limits=BodyLimits.from_settings(settings))
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # outside: counts the 413s too
    _document_upload_body(app)
    return app


def _webhook_worker(
    app: FastAPI,
    settings: Settings,
    policies: ServicePolicies,
    engine: Engine,
    policy: WorkerPolicy | None,
) -> WebhookWorker | None:
    """Start the thread that works off stored webhook deliveries (queued ones from before a
    restart too), where webhooks are on. A test may set `app.state.github_transport` first."""
    if settings.github_webhook_secret is None:
        return None
    policy = policy or WorkerPolicy.from_settings(settings)
    transport = getattr(app.state, "github_transport", None)
    context = WebhookContext(
        engine,
        GitHubAccess.from_settings(settings),
        policies.pull_report,
        app.state.links,
        app.state.shard_cache,
        transport,
        policy.github_retry,
    )
    worker = WebhookWorker(engine, partial(handle_webhook_delivery, context), policy=policy)
    app.state.webhook_worker = worker
    worker.start()
    return worker


def _compaction_job(app: FastAPI, settings: Settings, engine: Engine) -> CompactionJob | None:
    """Start the thread that rolls up results older than `CPCI_RAW_RETENTION_DAYS`, where it is
    set (`app.state.compaction`)."""
    if settings.raw_retention_days is None:
        return None
    job = CompactionJob(
        engine, retention_days=settings.raw_retention_days, interval_s=settings.compact_interval_s
    )
    app.state.compaction = job
    job.start()
    return job


def _document_upload_body(app: FastAPI) -> None:
    """The upload route reads its body itself (size limit, 400 on unknown versions), so its
    schema is added to the OpenAPI components by hand."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            body = RunEnvelope.model_json_schema(
                by_alias=True, ref_template="#/components/schemas/{model}"
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(body.pop("$defs", {}))
            components["RunEnvelope"] = body
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
