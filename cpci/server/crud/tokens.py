"""Upload tokens: create (the only time the token itself is seen), list, revoke, resolve."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from cpci.server.core.provenance import Credential, TokenScope
from cpci.server.core.security import new_token, token_sha256
from cpci.server.crud.repos import ensure_repository
from cpci.server.models import Repository, UploadToken, UploadTokenPublic, as_utc, utcnow


@dataclass(frozen=True)
class CreatedToken:
    token: str
    public: UploadTokenPublic


def create_token(
    *, session: Session, repository: str, name: str = "", scope: TokenScope = "branch"
) -> CreatedToken:
    """A new token (shown only now). The CLI defaults to scope `pr`; callers here say what they
    need, `branch` for service-side setup and tests of branch history."""
    repo_id = ensure_repository(session=session, name=repository)
    token = new_token()
    row = UploadToken(
        repository_id=repo_id, name=name, scope=scope, token_sha256=token_sha256(token)
    )
    session.add(row)
    session.flush()
    return CreatedToken(token, _public(row, repository))


def list_tokens(*, session: Session, repository: str | None = None) -> list[UploadTokenPublic]:
    query = select(UploadToken, Repository.name).join(Repository).order_by(col(UploadToken.id))
    if repository is not None:
        query = query.where(Repository.name == repository)
    return [_public(row, name) for row, name in session.exec(query)]


def revoke_token(*, session: Session, token_id: int) -> bool:
    row = session.get(UploadToken, token_id)
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    session.add(row)
    return True


def credential_for_token(*, session: Session, token: str) -> Credential | None:
    """Who a live token speaks for (repository, token id, scope); None if unknown or revoked."""
    found = session.exec(
        select(UploadToken, Repository.name)
        .join(Repository)
        .where(
            UploadToken.token_sha256 == token_sha256(token), col(UploadToken.revoked_at).is_(None)
        )
    ).first()
    if found is None:
        return None
    row, name = found
    scope: TokenScope = "pr" if row.scope == "pr" else "branch"
    return Credential(repository=name, via="token", subject=f"token:{row.id}", scope=scope)


def _public(row: UploadToken, repository: str) -> UploadTokenPublic:
    return UploadTokenPublic(
        id=row.id or 0,
        name=row.name,
        scope=row.scope,
        repository=repository,
        created_at=as_utc(row.created_at),
        revoked_at=as_utc(row.revoked_at) if row.revoked_at else None,
    )
