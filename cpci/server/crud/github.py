"""The bot's memory: webhook deliveries seen, and what was published on each PR."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cpci.github.bot import PullState
from cpci.github.consistency import ConsistencyResult
from cpci.server.models import GitHubDelivery, GitHubPullState, Repository, Run, utcnow


def record_delivery(
    *, session: Session, delivery_id: str, event: str, action: str | None, status: str
) -> bool:
    """Store a delivery; False when it was stored before (a redelivery)."""
    session.add(GitHubDelivery(delivery_id=delivery_id, event=event, action=action, status=status))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def finish_delivery(*, session: Session, delivery_id: str, status: str, detail: str = "") -> None:
    row = session.exec(
        select(GitHubDelivery).where(GitHubDelivery.delivery_id == delivery_id)
    ).one()
    row.status, row.detail = status, detail[:2000] or None
    session.add(row)
    session.commit()


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
        state.head_sha, state.comment_id, state.check_run_id,
    )  # fmt: skip
    row.consistency = state.consistency.model_dump(mode="json") if state.consistency else None
    row.updated_at = utcnow()
    session.add(row)
    session.commit()


def pulls_for_commit(*, session: Session, repository: str, commit: str) -> list[int]:
    """PRs that uploaded results for `commit`: a fork's workflow_run lists no PRs itself."""
    numbers = session.exec(
        select(Run.pull_request)
        .join(Repository, col(Repository.id) == col(Run.repository_id))
        .where(Repository.name == repository, Run.commit == commit,
               col(Run.pull_request).is_not(None))
        .distinct()
    ).all()  # fmt: skip
    return sorted(n for n in numbers if n is not None)


def _state_row(session: Session, repository: str, number: int) -> GitHubPullState | None:
    return session.exec(
        select(GitHubPullState).where(
            GitHubPullState.repository == repository, GitHubPullState.pull_request == number
        )
    ).first()
