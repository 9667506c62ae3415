"""Credentials: upload tokens (hashed), GitHub Actions OIDC (JWKS on loopback), read access."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from cpci.server.crud.tokens import create_token, revoke_token
from cpci.server.models import Run, UploadToken
from tests.builders import REPO, envelope, record, send, upload
from tests.server.databases import ClientFactory
from tests.server.oidc_keys import AUDIENCE, ISSUER, REPO_ID, Keys, jwks_server, oidc_service


def runs(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Run)).one()


@pytest.mark.parametrize(
    ("header", "status", "says"),
    [
        (None, 401, "cpci token create"),
        ("Bearer cpci_not-a-real-token", 401, "unknown or revoked"),
        ("Basic dXNlcjpwYXNz", 401, "not a bearer token"),
        ("Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig", 401, "OIDC tokens are not accepted"),
    ],
)
def test_bad_or_missing_credentials_write_nothing(
    make_client: ClientFactory, engine: Engine, header: str | None, status: int, says: str
) -> None:
    client = make_client()
    headers = {"Authorization": header} if header else {}
    response = send(client, envelope([record("p2p")]), headers=headers)
    assert response.status_code == status
    assert says in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"
    assert runs(engine) == 0


def test_token_of_another_repository_is_forbidden(client: TestClient, engine: Engine) -> None:
    response = send(client, envelope([record("p2p")], repository="other/repo"))
    assert response.status_code == 403
    assert f"is for {REPO}, not other/repo" in response.json()["detail"]
    assert runs(engine) == 0


def test_tokens_are_stored_hashed_and_can_be_revoked(
    client: TestClient, engine: Engine, token: str
) -> None:
    with Session(engine) as session:
        stored = session.exec(select(UploadToken)).one()
        assert token not in stored.token_sha256
        assert len(stored.token_sha256) == 64
        assert stored.id is not None
        assert revoke_token(session=session, token_id=stored.id)
        session.commit()
    response = send(client, envelope([record("p2p")]))
    assert response.status_code == 401


def test_token_read_access_needs_the_repositorys_token(
    make_client: ClientFactory, engine: Engine, token: str
) -> None:
    with Session(engine) as session:
        other = create_token(session=session, repository="other/repo").token
        session.commit()
    client = make_client(read_access="token")
    path = f"/api/v1/repos/{REPO}/runs/100"
    client.headers["Authorization"] = f"Bearer {token}"
    upload(client, envelope([record("p2p")]))
    assert client.get(path).status_code == 200
    assert client.get(path, headers={"Authorization": ""}).status_code == 401
    assert client.get(path, headers={"Authorization": f"Bearer {other}"}).status_code == 403
    public = make_client()
    assert public.get(path).status_code == 200


# --- GitHub Actions OIDC -------------------------------------------------------------------


@pytest.fixture(scope="module")
def jwks_url(keys: Keys) -> Iterator[str]:
    """A JWKS endpoint on loopback, like GitHub's /.well-known/jwks."""
    with jwks_server(keys) as url:
        yield url


@pytest.fixture
def oidc_client(make_client: ClientFactory, jwks_url: str) -> Iterator[TestClient]:
    with httpx.Client() as http:
        yield make_client(
            http=http,
            oidc_audience=AUDIENCE,
            oidc_issuer=ISSUER,
            oidc_jwks_url=jwks_url,
            oidc_allowed_repositories=(REPO, "other/repo"),
        )


def test_valid_oidc_token_uploads(oidc_client: TestClient, keys: Keys, engine: Engine) -> None:
    headers = {"Authorization": f"Bearer {keys.token()}"}
    response = send(oidc_client, envelope([record("p2p")]), headers=headers)
    assert response.status_code == 201, response.text
    again = envelope([record("p2p")], ci_run_id="101")
    fetched = keys.jwks_requests
    headers = {"Authorization": f"Bearer {keys.token(run_id='101')}"}  # run 101's own token
    assert send(oidc_client, again, headers=headers).status_code == 201
    assert keys.jwks_requests == fetched, "the JWKS is cached between uploads"
    assert runs(engine) == 2


@pytest.mark.parametrize(
    ("make_token", "status", "says"),
    [
        (lambda k: k.token(exp=int(time.time()) - 120), 401, "expired"),
        (lambda k: k.token(aud="someone-else"), 401, "audience"),
        (lambda k: k.token(iss="https://evil.example"), 401, "issued by"),
        (lambda k: k.token(key=k.evil), 401, "invalid"),
        (lambda k: k.token(kid="k9"), 401, "unknown key id"),
        (lambda k: k.token(repository="other/repo"), 403, "is for other/repo"),
        (lambda k: k.token(repository=None), 401, "invalid"),
    ],
    ids=["expired", "audience", "issuer", "signature", "kid", "repository", "no-repository"],
)
def test_bad_oidc_tokens_are_refused(
    oidc_client: TestClient, keys: Keys, engine: Engine, make_token: Any, status: int, says: str
) -> None:
    headers = {"Authorization": f"Bearer {make_token(keys)}"}
    response = send(oidc_client, envelope([record("p2p")]), headers=headers)
    assert response.status_code == status, response.text
    assert says in response.json()["detail"]
    assert runs(engine) == 0


def test_unreachable_jwks_is_503_naming_the_setting(
    make_client: ClientFactory, keys: Keys, engine: Engine
) -> None:
    with httpx.Client() as http:
        client = make_client(
            http=http,
            oidc_audience=AUDIENCE,
            oidc_jwks_url="http://127.0.0.1:9/jwks",
            oidc_allowed_repositories=(REPO,),
        )
        headers = {"Authorization": f"Bearer {keys.token()}"}
        response = send(client, envelope([record("p2p")]), headers=headers)
    assert response.status_code == 503
    assert "CPCI_OIDC_JWKS_URL" in response.json()["detail"]
    assert runs(engine) == 0


def test_token_reads_check_the_github_id_bound_to_the_name(
    engine: Engine, db_url: str, keys: Keys
) -> None:
    """A repository deleted and recreated (or another renamed onto the name) mints tokens with
    the same `repository` but another `repository_id`: they read nothing of the old history."""
    with oidc_service(db_url=db_url, keys=keys, engine=engine, read_access="token") as url:
        own = {"Authorization": f"Bearer {keys.token()}"}
        stored = send(url, envelope([record("p2p")]), headers=own)
        assert stored.status_code == 201, stored.text  # binds acme/attn to REPO_ID
        recreated = {"Authorization": f"Bearer {keys.token(repository_id='9999')}"}
        for path in (f"/api/v1/repos/{REPO}/runs/100", f"/ui/{REPO}/runs/100"):
            assert httpx.get(url + path, headers=own).status_code == 200, path
            refused = httpx.get(url + path, headers=recreated)
            assert refused.status_code == 403, path
            assert f"bound to GitHub repository id {REPO_ID}" in refused.text
