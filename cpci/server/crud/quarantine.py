"""Quarantines: added and released by a maintainer, released by evidence, read by reports.

At most one open quarantine per config (a partial unique index, so two replicas adding the same
one at once store one). Release is weighed on the trusted branch's results since the quarantine
began (`cpci.evidence.release`): its failures before the quarantine, the reason for it, never
count against it, and a config that keeps flaking keeps failing the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cpci.evidence import releasable
from cpci.schema import FlakeRecord
from cpci.server.analysis.flakiness import flake_record
from cpci.server.core.errors import Conflict, NotFound
from cpci.server.crud.history import observations
from cpci.server.models import Config, Quarantine, Run, utcnow
from cpci.urls import Links

#: Results per config read to weigh a release: enough for any release rate the settings allow
#: a history to reach (0.005 at the 95% level takes about 400 straight passes).
RELEASE_WINDOW = 2_000


@dataclass(frozen=True)
class Released:
    """A quarantine that evidence ended, with the record that ended it."""

    config: str
    record: FlakeRecord


def open_quarantines(*, session: Session, repo_id: int) -> dict[str, Quarantine]:
    """The repository's open quarantines by config key."""
    rows = session.exec(
        select(Quarantine).where(
            Quarantine.repository_id == repo_id, col(Quarantine.released_at).is_(None)
        )
    ).all()
    return {q.config_key: q for q in rows}


def list_quarantines(*, session: Session, repo_id: int, released: bool) -> list[Quarantine]:
    """Open quarantines by config key, then (with `released`) the ended ones, newest first."""
    rows = session.exec(select(Quarantine).where(Quarantine.repository_id == repo_id)).all()
    opened = sorted((q for q in rows if q.released_at is None), key=lambda q: q.config_key)
    ended = [q for q in rows if q.released_at is not None] if released else []
    ended.sort(key=lambda q: (q.released_at or q.added_at, q.id or 0), reverse=True)
    return opened + ended


def add_quarantine(*, session: Session, repo_id: int, key: str, reason: str, by: str) -> Quarantine:
    """Quarantine `key` (the caller commits); Conflict when it is quarantined already."""
    held = open_quarantines(session=session, repo_id=repo_id).get(key)
    if held is not None:
        raise _already(key, held)
    row = Quarantine(repository_id=repo_id, config_key=key, reason=reason, added_by=by)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:  # another request quarantined it at the same time
        session.rollback()
        held = open_quarantines(session=session, repo_id=repo_id).get(key)
        raise _already(key, held) from exc
    return row


def _already(key: str, held: Quarantine | None) -> Conflict:
    since = f" by {held.added_by} since {held.added_at:%Y-%m-%d %H:%M} UTC" if held else ""
    return Conflict(
        f"{key} is quarantined already{since}: release it first "
        "(`cpci quarantine remove OWNER/REPO CONFIG`) to quarantine it again with another reason"
    )


def release_quarantine(
    *, session: Session, repo_id: int, key: str, by: str, note: str, now: datetime | None = None
) -> Quarantine:
    """End `key`'s open quarantine (the caller commits); NotFound when it has none."""
    held = open_quarantines(session=session, repo_id=repo_id).get(key)
    if held is None:
        raise NotFound(
            f"{key} is not quarantined: `cpci quarantine list` shows the quarantined configs"
        )
    held.released_at = now or utcnow()
    held.released_by = by[:500]
    held.release_note = note[:2000]
    session.add(held)
    session.flush()
    return held


def evidence_since(
    *, session: Session, repo_id: int, repo_name: str, held: Quarantine, branch: str, links: Links
) -> FlakeRecord:
    """The trusted `branch`'s attempts of the quarantined config since it was quarantined,
    counted as the chance test counts them (`analysis.flakiness.flake_record`)."""
    config_pk = session.exec(
        select(Config.id).where(Config.repository_id == repo_id, Config.key == held.config_key)
    ).first()
    first = session.exec(
        select(func.min(Run.id)).where(
            Run.repository_id == repo_id, Run.created_at >= held.added_at
        )
    ).first()
    if config_pk is None or first is None:
        return FlakeRecord(failures=0, trials=0)
    history = observations(
        session=session,
        repo_name=repo_name,
        config_pks=[config_pk],
        window=RELEASE_WINDOW,
        links=links,
        branch=branch,
    )
    return flake_record([o for o in history.get(config_pk, ()) if o.run_id >= first])


def release_by_evidence(
    *,
    session: Session,
    repo_id: int,
    repo_name: str,
    branch: str,
    rate: float,
    level: float,
    links: Links,
) -> list[Released]:
    """End every open quarantine whose evidence since it began bounds its failure rate below
    `rate` at `level` (the caller commits): what a completed run of the trusted branch calls."""
    released = []
    for key, held in open_quarantines(session=session, repo_id=repo_id).items():
        record = evidence_since(
            session=session,
            repo_id=repo_id,
            repo_name=repo_name,
            held=held,
            branch=branch,
            links=links,
        )
        if record.trials and releasable(record, rate, level):
            note = (
                f"{record.trials - record.failures} of {record.trials} attempts on {branch} "
                f"passed since it was quarantined: its failure rate is below {rate:g} at the "
                f"{level:.0%} level"
            )
            release_quarantine(session=session, repo_id=repo_id, key=key, by="evidence", note=note)
            released.append(Released(key, record))
    return released
