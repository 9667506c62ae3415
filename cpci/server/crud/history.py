"""One config's history: pages for people, observation windows for the flakiness analysis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

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
    query = (
        select(Result, Run, Shard.uploaded_at)
        .join(Run, col(Result.run_id) == Run.id)
        .join(Shard, col(Result.shard_id) == Shard.id)
        .where(Result.config_id == config.id)
        .order_by(col(Result.id).desc())
        .limit(limit + 1)
    )
    if before is not None:
        query = query.where(col(Result.id) < before)
    rows = session.exec(query).all()
    entries = [
        HistoryEntry(
            result_id=result.id or 0,
            outcome=result.outcome,
            duration_s=result.duration_s,
            attempt=result.attempt,
            flaky=result.flaky,
            metrics=result.metrics or {},
            rank_errors=result.rank_errors or [],
            environment_id=result.environment_id,
            run=_link(run, repo.name, links),
            pull_request=run.pull_request,
            branch=run.branch,
            uploaded_at=as_utc(uploaded_at),
        )
        for result, run, uploaded_at in rows[:limit]
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
            select(Result, Run)
            .join(sub, col(Result.id) == sub.c.rid)
            .join(Run, col(Result.run_id) == Run.id)
            .where(sub.c.rn <= window)
            .order_by(col(Result.id))
        )
        for result, run in session.exec(query):
            out[result.config_id].append(
                Observation(
                    run=_link(run, repo_name, links),
                    run_id=run.id or 0,
                    environment_id=result.environment_id,
                    outcome=result.outcome,
                    flaky=result.flaky,
                    on_pull_request=run.pull_request is not None,
                )
            )
    return out


def _link(run: Run, repo_name: str, links: Links) -> RunLink:
    return RunLink(
        ci_run_id=run.ci_run_id,
        ci_attempt=run.ci_attempt,
        commit=run.commit,
        url=links.run(repo_name, run.ci_run_id, run.ci_attempt),
    )
