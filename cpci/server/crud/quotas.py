"""What the upload quotas need from the database: the repository's recent stored shards."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from cpci.server.models import Run, Shard, as_utc


def nth_latest_upload(
    *, session: Session, repo_id: int, n: int, since: datetime
) -> datetime | None:
    """When the repository's `n`-th most recent shard since `since` was stored; None when
    fewer were. One query, in the upload's own transaction.

    It walks the shard upload-time index from the newest down to `since` and stops at the
    `n`-th of this repository: its cost is bounded by the service's shards of the last hour,
    whatever the repository's history. (`repository_id + 0` keeps the planner from starting at
    the run table's repository index instead, which would read the repository's whole
    history.)"""
    when = session.exec(
        select(Shard.uploaded_at)
        .join(Run, col(Run.id) == col(Shard.run_id))
        .where(col(Run.repository_id) + 0 == repo_id, col(Shard.uploaded_at) >= since)
        .order_by(col(Shard.uploaded_at).desc())
        .offset(n - 1)
        .limit(1)
    ).first()
    return None if when is None else as_utc(when)
