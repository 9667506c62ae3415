"""One config's history: pages for people, observation windows for the flakiness analysis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import func
from sqlmodel import Session, col, select

from cpci.server.analysis.observations import Observation, RunLink
from cpci.server.core.errors import NotFound
from cpci.server.crud.common import chunks
from cpci.server.links import Links
from cpci.server.models import Config, Repository, Result, Run, Shard, as_utc
from cpci.server.reports import HistoryEntry, HistoryPage


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
    config = session.exec(
        select(Config).where(Config.repository_id == repo.id, Config.key == key)
    ).first()
    if config is None or config.id is None:
        raise NotFound(f"no config {key!r} in {repo.name}; config ids look like NODEID@WORLD_SIZE")
    # Named columns, not entities: a page is read on every click of the UI and by bots.
    query = (
        sa.select(
            col(Result.id), col(Result.outcome), col(Result.duration_s), col(Result.attempt),
            col(Result.flaky), col(Result.metrics), col(Result.rank_errors),
            col(Result.environment_id), col(Run.ci_run_id), col(Run.ci_attempt), col(Run.commit),
            col(Run.pull_request), col(Run.branch), col(Shard.uploaded_at),
        )
        .join(Run, col(Result.run_id) == Run.id)
        .join(Shard, col(Result.shard_id) == Shard.id)
        .where(col(Result.config_id) == config.id)
        .order_by(col(Result.id).desc())
        .limit(limit + 1)
    )  # fmt: skip
    if before is not None:
        query = query.where(col(Result.id) < before)
    rows = session.connection().execute(query).all()
    entries = [
        HistoryEntry(
            result_id=row.id,
            outcome=row.outcome,
            duration_s=row.duration_s,
            attempt=row.attempt,
            flaky=row.flaky,
            metrics=row.metrics or {},
            rank_errors=row.rank_errors or [],
            environment_id=row.environment_id,
            run=_link(row, repo.name, links),
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
    )


def observations(
    *,
    session: Session,
    repo_name: str,
    config_ids: Sequence[int],
    window: int,
    links: Links,
    exclude_commit: str | None = None,
) -> dict[int, list[Observation]]:
    """The latest `window` results of each config, oldest first, as the analysis reads them."""
    out: dict[int, list[Observation]] = defaultdict(list)
    for chunk in chunks(list(config_ids)):
        ranked: Any = select(
            col(Result.id).label("rid"),
            func.row_number()
            .over(partition_by=col(Result.config_id), order_by=col(Result.id).desc())
            .label("rn"),
        ).where(col(Result.config_id).in_(chunk))
        if exclude_commit is not None:
            ranked = ranked.join(Run, col(Result.run_id) == Run.id).where(
                Run.commit != exclude_commit
            )
        sub = ranked.subquery()
        query = (
            sa.select(
                col(Result.config_id), col(Result.environment_id), col(Result.outcome),
                col(Result.flaky), col(Run.id), col(Run.ci_run_id), col(Run.ci_attempt),
                col(Run.commit), col(Run.pull_request),
            )
            .join(sub, col(Result.id) == sub.c.rid)
            .join(Run, col(Result.run_id) == Run.id)
            .where(sub.c.rn <= window)
            .order_by(col(Result.id))
        )  # fmt: skip
        for row in session.connection().execute(query):
            out[row.config_id].append(
                Observation(
                    run=_link(row, repo_name, links),
                    run_id=row.id,
                    environment_id=row.environment_id,
                    outcome=row.outcome,
                    flaky=row.flaky,
                    on_pull_request=row.pull_request is not None,
                )
            )
    return out


def _link(row: Any, repo_name: str, links: Links) -> RunLink:
    """The run of a history row (its `ci_run_id`, `ci_attempt` and `commit` columns)."""
    return RunLink(
        ci_run_id=row.ci_run_id,
        ci_attempt=row.ci_attempt,
        commit=row.commit,
        url=links.run(repo_name, row.ci_run_id, row.ci_attempt),
    )
