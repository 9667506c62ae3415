"""Dependencies the routers share, as `Annotated` aliases: the app's policies and settings,
sessions, links and cache, who is calling."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy import Engine
from sqlmodel import Session

from cpci.schema import INT32_MAX
from cpci.server.core.config import Settings
from cpci.server.core.errors import Unauthorized
from cpci.server.core.oidc import OidcVerifier
from cpci.server.core.policies import PullReportPolicy, ServicePolicies
from cpci.server.core.provenance import (
    Credential,
    OidcClaims,
    check_allowed,
    check_repository_id,
)
from cpci.server.core.security import looks_like_upload_token
from cpci.server.crud.repos import get_repository
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.crud.tokens import credential_for_token
from cpci.server.models import Repository
from cpci.urls import Links

HOW_TO_AUTHENTICATE = (
    "send `Authorization: Bearer TOKEN` with a token from `cpci token create OWNER/REPO`"
)


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_policies(request: Request) -> ServicePolicies:
    policies: ServicePolicies = request.app.state.policies
    return policies


def get_pull_report_policy(request: Request) -> PullReportPolicy:
    return get_policies(request).pull_report


def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_links(request: Request) -> Links:
    links: Links = request.app.state.links
    return links


def get_shard_cache(request: Request) -> ShardCache:
    cache: ShardCache = request.app.state.shard_cache
    return cache


#: Requests that only read: their sessions may go to the read replica (CPCI_DATABASE_READ_URL).
SAFE_METHODS = frozenset({"GET", "HEAD"})


def get_session(request: Request) -> Iterator[Session]:
    """A session for the route: on the read engine (`app.state.read_engine`, the primary
    unless CPCI_DATABASE_READ_URL names a replica) for GET and HEAD, which never write; on
    the primary for every other method, so a write, and what it reads, sees its own writes."""
    state = request.app.state
    engine: Engine = state.read_engine if request.method in SAFE_METHODS else state.engine
    with Session(engine) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
#: The app's policies, built once from its settings (`core.policies`).
PoliciesDep = Annotated[ServicePolicies, Depends(get_policies)]
#: How PR reports (and the dashboard and flaky list that agree with them) judge and look back.
PullReportPolicyDep = Annotated[PullReportPolicy, Depends(get_pull_report_policy)]
EngineDep = Annotated[Engine, Depends(get_engine)]
#: A session: the read replica's for GET and HEAD, the primary's otherwise (`get_session`).
SessionDep = Annotated[Session, Depends(get_session)]
LinksDep = Annotated[Links, Depends(get_links)]
#: The app's one cache of what was read from stored shards (see `cpci.server.crud.shard_cache`).
ShardCacheDep = Annotated[ShardCache, Depends(get_shard_cache)]
#: A pull request number as a path parameter: bounded like the column it is looked up in.
PullNumber = Annotated[int, Path(ge=1, le=INT32_MAX, description="the pull request's number")]


def authenticate(request: Request, engine: Engine) -> Credential | None:
    """The caller's credential from the bearer token, None without one; 401 for a bad one, 403
    for a valid OIDC token of a repository the service does not allow-list."""
    header = request.headers.get("authorization", "")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(f"the Authorization header is not a bearer token: {HOW_TO_AUTHENTICATE}")
    if looks_like_upload_token(token):
        with Session(engine) as session:
            credential = credential_for_token(session=session, token=token)
        if credential is None:
            raise Unauthorized(
                "unknown or revoked upload token: create a new one with "
                "`cpci token create OWNER/REPO`"
            )
        return credential
    verifier: OidcVerifier | None = request.app.state.oidc
    if verifier is None:
        raise Unauthorized(
            "not an upload token, and OIDC tokens are not accepted here (the server has no "
            f"CPCI_OIDC_ALLOWED_REPOSITORIES): {HOW_TO_AUTHENTICATE}"
        )
    claims = OidcClaims.from_verified(verifier.verify(token))
    check_allowed(claims, get_policies(request).access.oidc)
    return Credential(
        repository=claims.repository, via="oidc", subject=claims.subject, claims=claims
    )


def require_credential(request: Request, engine: EngineDep) -> Credential:
    credential = authenticate(request, engine)
    if credential is None:
        raise Unauthorized(
            f"uploading needs credentials: {HOW_TO_AUTHENTICATE}, or a GitHub Actions OIDC token"
        )
    return credential


#: Who is calling, proven by a token: the repository, and what they may claim in it.
CredentialDep = Annotated[Credential, Depends(require_credential)]


def readable_repository(
    owner: str,
    repo: str,
    request: Request,
    engine: EngineDep,
    policies: PoliciesDep,
    session: SessionDep,
) -> Repository:
    """The repository in the path, after checking the caller may read it: where reads need a
    token, one of that repository, and an OIDC token of the GitHub repository its name is
    bound to (not of another that took the name since)."""
    name = f"{owner}/{repo}"
    if policies.access.reads == "public":
        return get_repository(session=session, name=name)
    credential = authenticate(request, engine)
    if credential is None:
        raise Unauthorized(f"reading {name} needs a token of it: {HOW_TO_AUTHENTICATE}")
    credential.require(name)
    repository = get_repository(session=session, name=name)
    if credential.claims is not None:
        claimed = credential.claims.repository_id
        check_repository_id(name=name, bound=repository.github_id, claimed=claimed)
    return repository


def require_reader(request: Request, engine: EngineDep, policies: PoliciesDep) -> None:
    """Where reads need a token, any credential this service accepts (an upload token of one
    of its repositories, an allow-listed OIDC token): for what spans every repository."""
    if policies.access.reads == "token" and authenticate(request, engine) is None:
        raise Unauthorized(
            "reads need a token here (CPCI_READ_ACCESS=token): send `Authorization: Bearer "
            "TOKEN` with an upload token of any repository of this service"
        )


ReadableRepoDep = Annotated[Repository, Depends(readable_repository)]
