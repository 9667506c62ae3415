"""Quarantining a config and releasing it: maintainers' writes, with branch rights.

A quarantine changes what gates every pull request, so it takes what writes the history every PR
is judged by: an upload token of scope `branch`, or an OIDC token from a branch run
(`core.provenance.require_branch_rights`). Reading them is a read like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query

from cpci.schema import QuarantineEntry, QuarantineList, QuarantineRequest
from cpci.server.api.deps import (
    CredentialDep,
    LinksDep,
    PoliciesDep,
    ReadableRepoDep,
    SessionDep,
)
from cpci.server.core.provenance import Credential, require_branch_rights
from cpci.server.crud.quarantine import add_quarantine, release_quarantine
from cpci.server.crud.repos import ensure_repository
from cpci.server.models import Quarantine, Repository
from cpci.server.views.quarantine import quarantine_entry, quarantine_list

router = APIRouter(prefix="/repos/{owner}/{repo}/quarantines", tags=["quarantine"])

HINT = (
    "quarantine with a `branch` token (`cpci token create OWNER/REPO --scope branch`), as a "
    "maintainer holds it"
)
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    403: {"description": "the credential has no branch rights, or is for another repository"},
}


@router.get("", summary="Quarantined configs: who, why, since when, and what releases them")
def quarantines(
    repository: ReadableRepoDep,
    session: SessionDep,
    policies: PoliciesDep,
    links: LinksDep,
    released: Annotated[bool, Query(description="also list ended quarantines")] = False,
) -> QuarantineList:
    return quarantine_list(
        session=session,
        repo=repository,
        released=released,
        report_policy=policies.pull_report,
        policy=policies.quarantine,
        links=links,
    )


@router.post(
    "",
    status_code=201,
    summary="Quarantine a config: it still runs and is recorded, and never gates",
    responses={**WRITE_ERRORS, 409: {"description": "it is quarantined already"}},
)
def add(
    owner: str,
    repo: str,
    body: QuarantineRequest,
    credential: CredentialDep,
    session: SessionDep,
    policies: PoliciesDep,
    links: LinksDep,
) -> QuarantineEntry:
    return _write(
        owner,
        repo,
        credential,
        session,
        policies,
        links,
        "quarantining a config",
        lambda repo_id: add_quarantine(
            session=session,
            repo_id=repo_id,
            key=body.config,
            reason=body.reason,
            by=credential.subject,
        ),
    )


@router.post(
    "/release",
    summary="Release a quarantined config by hand (evidence releases it by itself)",
    responses={**WRITE_ERRORS, 404: {"description": "it is not quarantined"}},
)
def release(
    owner: str,
    repo: str,
    body: QuarantineRequest,
    credential: CredentialDep,
    session: SessionDep,
    policies: PoliciesDep,
    links: LinksDep,
) -> QuarantineEntry:
    return _write(
        owner,
        repo,
        credential,
        session,
        policies,
        links,
        "releasing a quarantine",
        lambda repo_id: release_quarantine(
            session=session,
            repo_id=repo_id,
            key=body.config,
            by=credential.subject,
            note=body.reason,
        ),
    )


def _write(
    owner: str,
    repo: str,
    credential: Credential,
    session: SessionDep,
    policies: PoliciesDep,
    links: LinksDep,
    doing: str,
    change: Callable[[int], Quarantine],
) -> QuarantineEntry:
    """One quarantine write: the caller's branch rights on OWNER/REPO, `change` on the
    repository's id, the commit, and the entry as the list shows it."""
    name = f"{owner}/{repo}"
    credential.require(name)
    require_branch_rights(credential, doing, HINT)
    repository = session.get_one(Repository, ensure_repository(session=session, name=name))
    assert repository.id is not None
    held = change(repository.id)
    session.commit()
    branch = policies.pull_report.trusted.default_branch(repository.default_branch)
    return quarantine_entry(
        session=session,
        repo=repository,
        held=held,
        branch=branch,
        policy=policies.quarantine,
        links=links,
    )
