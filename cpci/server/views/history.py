"""One config's history, a page at a time, newest first (the history endpoint)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Session, col

from cpci.server.crud.common import metric_names
from cpci.server.crud.history import run_link
from cpci.server.crud.repos import get_config
from cpci.server.models import Repository, Result, ResultDetail, Run, Shard, as_utc
from cpci.server.packed import unpack_metrics
from cpci.server.views.config_overview import rolled_up
from cpci.server.views.read_models import HistoryEntry, HistoryPage
from cpci.urls import Links


def config_history(
    *,
    session: Session,
    repo: Repository,
    key: str,
    before: int | None,
    limit: int,
    links: Links,
) -> HistoryPage:
    """Newest first; `before` is the cursor (a result id) from the previous page."""
    config = get_config(session=session, repo=repo, key=key)
    assert config.id is not None
    # Named columns, not entities: a page is read on every click of the UI and by bots.
    query = (
        sa.select(
            col(Result.id),
            col(Result.outcome),
            col(Result.duration_s),
            col(Result.attempt),
            col(Result.flaky),
            col(Result.metrics),
            col(ResultDetail.rank_errors),
            col(Shard.environment_id),
            col(Run.ci_run_id),
            col(Run.ci_attempt),
            col(Run.commit),
            col(Run.pull_request),
            col(Run.branch),
            col(Shard.uploaded_at),
        )
        .join(Shard, col(Result.shard_id) == Shard.id)
        .join(Run, col(Shard.run_id) == Run.id)
        .outerjoin(ResultDetail, col(ResultDetail.result_id) == col(Result.id))
        .where(col(Result.config_id) == config.id)
        .order_by(col(Result.id).desc())
        .limit(limit + 1)
    )
    if before is not None:
        query = query.where(col(Result.id) < before)
    rows = session.connection().execute(query).all()
    names = metric_names(session, (row.metrics for row in rows))
    entries = [
        HistoryEntry(
            result_id=row.id,
            outcome=row.outcome,
            duration_s=row.duration_s,
            attempt=row.attempt,
            flaky=row.flaky,
            metrics=unpack_metrics(row.metrics, names),
            rank_errors=row.rank_errors or [],
            environment_id=row.environment_id,
            run=run_link(row.ci_run_id, row.ci_attempt, row.commit, repo.name, links),
            pull_request=row.pull_request,
            branch=row.branch,
            uploaded_at=as_utc(row.uploaded_at),
        )
        for row in rows[:limit]
    ]
    more = len(rows) > limit
    return HistoryPage(
        repository=repo.name,
        config=key,
        config_pk=config.id,
        params=config.params or {},
        entries=entries,
        next_cursor=entries[-1].result_id if more and entries else None,
        # Read on the last page only: the hot first pages of a long history cost nothing more.
        aggregates=None if more else rolled_up(session, config.id),
    )
