"""The bot's memory: webhook deliveries (a durable work queue), and what was published on
each PR."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import and_, func, or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cpci.github.bot import PullState
from cpci.github.consistency import ConsistencyResult
from cpci.server.models import GitHubPullState, Repository, Run, WebhookDelivery, as_utc, utcnow

#: Statuses after which a redelivery of the same GUID is a duplicate; any other is redone.
FINISHED = frozenset({"done", "ignored"})
Receipt = Literal["new", "requeued", "duplicate", "replay"]


@dataclass(frozen=True)
class QueuedWebhookDelivery:
    """A delivery a worker has claimed: what it needs to act on it."""

    delivery_id: str
    event: str
    action: str | None
    payload: dict[str, Any]
    attempts: int  # including this one


def record_webhook_delivery(
    *,
    session: Session,
    delivery_id: str,
    event: str,
    action: str | None,
    status: Literal["queued", "ignored"],
    digest: str,
    payload: dict[str, Any] | None,
    now: datetime,
) -> Receipt:
    """Store a delivery (queued work with its payload, or ignored) before it is answered.

    A GUID seen before is a `duplicate` only once its work finished; a queued or failed one is
    queued again (GitHub's manual redelivery is how a person retries), one a worker holds now
    is left to it (`requeued`, unchanged). A body stored
    before under another GUID is a `replay` and is not stored again.
    """
    existing = _webhook_delivery(session, delivery_id)
    if existing is not None:
        if existing.status in FINISHED:
            return "duplicate"
        if existing.status == "running" and as_utc(existing.lease_until or now) > now:
            return "requeued"  # a worker holds it now; two at once could both comment
        _queue(existing, now)
        existing.payload = payload if payload is not None else existing.payload
        session.add(existing)
        session.commit()
        return "requeued"
    stored = session.exec(
        select(WebhookDelivery.delivery_id).where(WebhookDelivery.digest == digest)
    ).first()
    if stored is not None:  # this GUID too, stored by another replica since the lookup above:
        return "duplicate" if stored == delivery_id else "replay"  # one delivery sent twice
    row = WebhookDelivery(
        delivery_id=delivery_id,
        event=event,
        action=action,
        status=status,
        digest=digest,
        payload=payload,
        next_attempt_at=now if status == "queued" else None,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:  # the same GUID or body arrived at once on another request
        session.rollback()
        return "duplicate" if _webhook_delivery(session, delivery_id) is not None else "replay"
    return "new"


def claim_webhook_delivery(
    *, session: Session, now: datetime, lease_s: float
) -> QueuedWebhookDelivery | None:
    """Take the oldest due delivery (queued and due, or running with a lapsed lease: its worker
    died) and hold it for `lease_s`. `session` must be a write session (SQLite: BEGIN IMMEDIATE);
    on PostgreSQL, `SKIP LOCKED` lets replicas claim side by side, never the same row."""
    due = or_(
        and_(col(WebhookDelivery.status) == "queued", col(WebhookDelivery.next_attempt_at) <= now),
        and_(col(WebhookDelivery.status) == "running", col(WebhookDelivery.lease_until) < now),
    )
    row = session.exec(
        select(WebhookDelivery)
        .where(due)
        .order_by(col(WebhookDelivery.next_attempt_at), col(WebhookDelivery.id))
        .limit(1)
        .with_for_update(skip_locked=True)
    ).first()
    if row is None:
        session.rollback()
        return None
    row.status, row.attempts = "running", row.attempts + 1
    row.lease_until = now + timedelta(seconds=lease_s)
    claimed = QueuedWebhookDelivery(
        row.delivery_id, row.event, row.action, row.payload or {}, row.attempts
    )
    session.add(row)
    session.commit()
    return claimed


def next_due(*, session: Session) -> datetime | None:
    """When the next delivery falls due (a queued one's time, or a running one's lease end)."""
    times = [
        session.exec(
            select(func.min(col(WebhookDelivery.next_attempt_at))).where(
                WebhookDelivery.status == "queued"
            )
        ).one(),
        session.exec(
            select(func.min(col(WebhookDelivery.lease_until))).where(
                WebhookDelivery.status == "running"
            )
        ).one(),
    ]
    known = [as_utc(t) for t in times if t is not None]
    return min(known) if known else None


def finish_webhook_delivery(
    *,
    session: Session,
    delivery_id: str,
    status: Literal["done", "failed"],
    detail: str = "",
    retry_at: datetime | None = None,
) -> None:
    """Record the outcome; a failure with `retry_at` is queued again for then. A finished
    delivery lets go of its payload (up to 25 MB): a redelivery brings it again."""
    row = _webhook_delivery(session, delivery_id)
    if row is None:
        return
    if retry_at is not None:
        row.status, row.next_attempt_at = "queued", retry_at
    else:
        row.status, row.next_attempt_at, row.payload = status, None, None
    row.detail, row.lease_until = detail[:2000] or None, None
    session.add(row)
    session.commit()


def _queue(row: WebhookDelivery, now: datetime) -> None:
    row.status, row.attempts, row.next_attempt_at, row.lease_until = "queued", 0, now, None


def _webhook_delivery(session: Session, delivery_id: str) -> WebhookDelivery | None:
    row: WebhookDelivery | None = session.exec(
        select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery_id)
    ).first()
    return row


def load_pull_state(*, session: Session, repository: str, number: int) -> PullState | None:
    row = _state_row(session, repository, number)
    if row is None:
        return None
    consistency = ConsistencyResult.model_validate(row.consistency) if row.consistency else None
    return PullState(row.head_sha, row.comment_id, row.check_run_id, consistency)


def save_pull_state(*, session: Session, repository: str, number: int, state: PullState) -> None:
    row = _state_row(session, repository, number) or GitHubPullState(
        repository=repository, pull_request=number, head_sha=state.head_sha
    )
    row.head_sha, row.comment_id, row.check_run_id = (
        state.head_sha,
        state.comment_id,
        state.check_run_id,
    )
    row.consistency = state.consistency.model_dump(mode="json") if state.consistency else None
    row.updated_at = utcnow()
    session.add(row)
    session.commit()


def pulls_for_commit(*, session: Session, repository: str, commit: str) -> list[int]:
    """PRs that uploaded results for `commit`: a fork's workflow_run lists no PRs itself."""
    numbers = session.exec(
        select(Run.pull_request)
        .join(Repository, col(Repository.id) == col(Run.repository_id))
        .where(
            Repository.name == repository, Run.commit == commit, col(Run.pull_request).is_not(None)
        )
        .distinct()
    ).all()
    return sorted(n for n in numbers if n is not None)


def _state_row(session: Session, repository: str, number: int) -> GitHubPullState | None:
    row: GitHubPullState | None = session.exec(
        select(GitHubPullState).where(
            GitHubPullState.repository == repository, GitHubPullState.pull_request == number
        )
    ).first()
    return row
