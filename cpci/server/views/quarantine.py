"""Quarantines as the API and the UI show them: who, why, since when, and what releases them."""

from __future__ import annotations

from sqlmodel import Session

from cpci.evidence import jeffreys_upper, passes_to_release
from cpci.schema import QuarantineEntry, QuarantineList
from cpci.server.core.policies import PullReportPolicy, QuarantinePolicy
from cpci.server.crud.quarantine import evidence_since, list_quarantines
from cpci.server.models import Quarantine, Repository, as_utc
from cpci.urls import Links


def quarantine_entry(
    *,
    session: Session,
    repo: Repository,
    held: Quarantine,
    branch: str,
    policy: QuarantinePolicy,
    links: Links,
) -> QuarantineEntry:
    """One quarantine with its evidence since it began and the straight passes it still needs."""
    assert repo.id is not None
    record = evidence_since(
        session=session, repo_id=repo.id, repo_name=repo.name, held=held, branch=branch, links=links
    )
    return QuarantineEntry(
        config=held.config_key,
        reason=held.reason,
        by=held.added_by,
        since=as_utc(held.added_at),
        released_at=as_utc(held.released_at) if held.released_at else None,
        released_by=held.released_by,
        release_note=held.release_note,
        evidence=record,
        rate_upper=round(jeffreys_upper(record.failures, record.trials, policy.level), 4),
        passes_to_release=passes_to_release(record, policy.release_rate, policy.level),
    )


def quarantine_list(
    *,
    session: Session,
    repo: Repository,
    released: bool,
    report_policy: PullReportPolicy,
    policy: QuarantinePolicy,
    links: Links,
) -> QuarantineList:
    """The repository's open quarantines (and, with `released`, the ended ones)."""
    assert repo.id is not None
    branch = report_policy.trusted.default_branch(repo.default_branch)
    rows = list_quarantines(session=session, repo_id=repo.id, released=released)
    return QuarantineList(
        repository=repo.name,
        branch=branch,
        release_rate=policy.release_rate,
        level=policy.level,
        quarantines=[
            quarantine_entry(
                session=session, repo=repo, held=q, branch=branch, policy=policy, links=links
            )
            for q in rows
        ],
    )
