"""The OIDC allow-list over real HTTP: RSA-signed GitHub tokens (JWKS on loopback) against a
real uvicorn. With CPCI_OIDC_ALLOWED_REPOSITORIES / _IDS set, a valid token of any other
repository is a 403 naming the settings, on uploads and on commit ancestry alike, and no
repository row is created for its name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.server import Settings
from cpci.server.core.provenance import OidcAllowList, OidcClaims
from cpci.server.models import Repository
from tests.builders import BASE, REPO, envelope, send
from tests.server.oidc_keys import REPO_ID, Keys, oidc_service

#: A repository allow-listed by id only: GitHub's id survives a rename.
RENAMED, RENAMED_ID = "acme-old/attn-renamed", "777"


@pytest.fixture
def base_url(engine: Engine, db_url: str, keys: Keys) -> Iterator[str]:
    with oidc_service(
        db_url=db_url,
        keys=keys,
        engine=engine,
        oidc_allowed_repositories=("acme/*", "solo/one"),
        oidc_allowed_repository_ids=(int(RENAMED_ID),),
    ) as url:
        yield url


def token_of(keys: Keys, repository: str, repository_id: str | None) -> str:
    """A push to main of `repository`, as GitHub would mint it for that repository (None: a
    token without the repository_id claim)."""
    return keys.token(
        repository=repository,
        repository_id=repository_id,
        sub=f"repo:{repository}:ref:refs/heads/main",
        job_workflow_ref=f"{repository}/.github/workflows/ci.yml@refs/heads/main",
    )


def upload(base_url: str, bearer: str, repository: str) -> httpx.Response:
    """One passing config of `repository`, sent with `bearer`."""
    return send(base_url, envelope(repository=repository), token=bearer)


def repositories(engine: Engine) -> set[str]:
    with Session(engine) as session:
        return set(session.exec(select(Repository.name)).all())


def test_allow_listed_names_owners_and_ids_upload(
    base_url: str, keys: Keys, engine: Engine
) -> None:
    assert upload(base_url, keys.token(), REPO).status_code == 201  # acme/* covers acme/attn
    assert upload(base_url, token_of(keys, "solo/one", "11"), "solo/one").status_code == 201
    by_id = upload(base_url, token_of(keys, RENAMED, RENAMED_ID), RENAMED)
    assert by_id.status_code == 201, by_id.text
    assert repositories(engine) == {REPO, "solo/one", RENAMED}


@pytest.mark.parametrize(
    ("repository", "repository_id"),
    [
        ("evil/attn", "66"),
        ("solo/two", "67"),  # solo/one is listed, not solo/*
        ("acme-evil/attn", "68"),  # acme/* is the owner acme only
        ("evil/no-id", None),
    ],
    ids=["other-owner", "other-repo-of-a-listed-owner", "owner-prefix", "no-id-claim"],
)
def test_any_other_repositorys_token_is_403_naming_the_setting_and_creates_nothing(
    base_url: str, keys: Keys, engine: Engine, repository: str, repository_id: str | None
) -> None:
    stranger = token_of(keys, repository, repository_id)
    refused = upload(base_url, stranger, repository)
    assert refused.status_code == 403, refused.text
    detail = refused.json()["detail"]
    assert f"OIDC tokens of {repository}" in detail
    assert "CPCI_OIDC_ALLOWED_REPOSITORIES" in detail
    assert "CPCI_OIDC_ALLOWED_REPOSITORY_IDS" in detail
    ancestry = httpx.post(
        f"{base_url}/api/v1/repos/{repository}/commits",
        json={"parents": [{"commit": "c" * 40, "parent": BASE}]},
        headers={"Authorization": f"Bearer {stranger}"},
    )
    assert ancestry.status_code == 403
    assert "CPCI_OIDC_ALLOWED_REPOSITORIES" in ancestry.json()["detail"]
    assert repositories(engine) == set()


def claims(repository: str, repository_id: str | None = None) -> OidcClaims:
    return OidcClaims(repository, repository_id, "sub", "push", "refs/heads/main", None)


@pytest.mark.parametrize(
    ("allowed", "claim", "admitted"),
    [
        (OidcAllowList(), claims("anyone/at-all"), True),
        (OidcAllowList(names=("acme/attn",)), claims("ACME/Attn"), True),  # GitHub ignores case
        (OidcAllowList(names=("acme/*",)), claims("acme/other"), True),
        (OidcAllowList(names=("acme/*",)), claims("acmeX/other"), False),
        (OidcAllowList(names=("acme/attn",)), claims("acme/attn2"), False),
        (OidcAllowList(ids=(42,)), claims("x/y", "42"), True),
        (OidcAllowList(ids=(42,)), claims("x/y", "420"), False),
        (OidcAllowList(ids=(42,)), claims("x/y", None), False),
    ],
)
def test_the_allow_list_rule(allowed: OidcAllowList, claim: OidcClaims, admitted: bool) -> None:
    assert allowed.admits(claim) is admitted


@pytest.mark.parametrize("entry", ["acme", "acme/*/x", "*/attn", "acme/at tn", ""])
def test_a_malformed_allow_list_entry_is_refused_naming_the_setting(entry: str) -> None:
    with pytest.raises(ValidationError, match="CPCI_OIDC_ALLOWED_REPOSITORIES entries must be"):
        Settings(oidc_allowed_repositories=(entry,))


def test_the_allow_list_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_OIDC_ALLOWED_REPOSITORIES", '["acme/*", "solo/one"]')
    monkeypatch.setenv("CPCI_OIDC_ALLOWED_REPOSITORY_IDS", f"[{REPO_ID}]")
    monkeypatch.setenv("CPCI_PUBLIC_URL", "https://cpci.example.com")
    settings: Any = Settings()
    assert settings.oidc_allowed_repositories == ("acme/*", "solo/one")
    assert settings.oidc_allowed_repository_ids == (int(REPO_ID),)
