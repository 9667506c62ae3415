"""Upload quotas over real HTTP, on SQLite and PostgreSQL: RSA-signed GitHub OIDC tokens against
real uvicorns. Results per upload over CPCI_MAX_RESULTS_PER_UPLOAD are a 413 naming it; stored
shards per repository per hour over CPCI_MAX_UPLOADS_PER_HOUR are a 429 with Retry-After,
counted in the database so two replicas on one database agree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import Engine, update
from sqlmodel import Session, col, func, select

from cpci.server import Settings, create_app
from cpci.server.models import Result, Shard, utcnow
from tests.builders import REPO, envelope, record, send
from tests.live_server import serve
from tests.server.oidc_keys import AUDIENCE, ISSUER, Keys, jwks_server

OTHER = "acme/other"


@pytest.fixture
def replicas(db_url: str, keys: Keys) -> Iterator[tuple[str, str]]:
    """Two services on one database, each with its own engine, as behind a load balancer."""
    with ExitStack() as stack:
        jwks = stack.enter_context(jwks_server(keys))
        settings = Settings(
            database_url=db_url,
            oidc_audience=AUDIENCE,
            oidc_issuer=ISSUER,
            oidc_jwks_url=jwks,
            oidc_allowed_repositories=(REPO, OTHER),
            max_results_per_upload=3,
            max_uploads_per_hour=2,
        )
        yield (
            stack.enter_context(serve(create_app(settings))),
            stack.enter_context(serve(create_app(settings))),
        )


def token_of(keys: Keys, repository: str) -> str:
    return keys.token(
        repository=repository,
        repository_id=None,
        sub=f"repo:{repository}:ref:refs/heads/main",
        job_workflow_ref=f"{repository}/.github/workflows/ci.yml@refs/heads/main",
    )


def upload(
    base_url: str, keys: Keys, shard: int, *, results: int = 1, repository: str = REPO
) -> httpx.Response:
    body = envelope(
        [record(f"c{i}") for i in range(results)],
        repository=repository,
        shard_index=shard,
        shard_total=9,
    )
    bearer = token_of(keys, repository)
    return send(base_url, body, headers={"Authorization": f"Bearer {bearer}"})


def age_shards(engine: Engine, by: timedelta, *, shard: int | None = None) -> None:
    """Move stored shards' upload time back, as if they had been uploaded `by` earlier."""
    with Session(engine) as session:
        query = update(Shard).values(uploaded_at=utcnow() - by)
        if shard is not None:
            query = query.where(col(Shard.shard_index) == shard)
        session.exec(query)
        session.commit()


def test_more_results_than_the_limit_is_413_naming_the_setting(
    replicas: tuple[str, str], keys: Keys, engine: Engine
) -> None:
    a, _ = replicas
    refused = upload(a, keys, 0, results=4)
    assert refused.status_code == 413, refused.text
    assert refused.json()["code"] == "payload_too_large"
    detail = refused.json()["detail"]
    assert "holds 4 results, over the limit of 3 per upload" in detail
    assert "CPCI_MAX_RESULTS_PER_UPLOAD" in detail
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Result)).one() == 0
    assert upload(a, keys, 0, results=3).status_code == 201


def test_uploads_per_hour_are_counted_in_the_database_so_replicas_agree(
    replicas: tuple[str, str], keys: Keys, engine: Engine
) -> None:
    a, b = replicas
    assert upload(a, keys, 0).status_code == 201
    assert upload(b, keys, 1).status_code == 201
    refused = upload(a, keys, 2)
    assert refused.status_code == 429, refused.text
    assert refused.json()["code"] == "quota_exceeded"
    assert "stored 2 uploads in the last hour" in refused.json()["detail"]
    assert "CPCI_MAX_UPLOADS_PER_HOUR" in refused.json()["detail"]
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3600
    assert upload(b, keys, 2).status_code == 429  # the other replica counts the same rows
    # A retry of a stored shard stores nothing, so it is never refused for the quota.
    assert upload(b, keys, 0).json()["status"] == "duplicate"
    # Another repository has its own quota.
    assert upload(b, keys, 0, repository=OTHER).status_code == 201
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Shard)).one() == 3


def test_retry_after_says_when_the_oldest_counted_upload_leaves_the_hour(
    replicas: tuple[str, str], keys: Keys, engine: Engine
) -> None:
    a, b = replicas
    assert upload(a, keys, 0).status_code == 201
    assert upload(a, keys, 1).status_code == 201
    age_shards(engine, timedelta(minutes=59), shard=0)
    refused = upload(b, keys, 2)
    assert refused.status_code == 429
    assert 55 <= int(refused.headers["Retry-After"]) <= 61
    age_shards(engine, timedelta(minutes=61), shard=0)  # out of the window: one counted
    assert upload(b, keys, 2).status_code == 201
    assert upload(a, keys, 3).status_code == 429
    age_shards(engine, timedelta(hours=2))
    assert upload(a, keys, 3).status_code == 201
