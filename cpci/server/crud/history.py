"""One config's history: pages for people, observation windows for the flakiness analysis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from sqlmodel import Session, col

from cpci.schema import FAILING_OUTCOMES, RunLink
from cpci.server.analysis.observations import Observation
from cpci.server.analysis.signatures import signature
from cpci.server.analysis.verdicts import culprit_error
from cpci.server.crud.common import chunks, fetch_rows, from_json
from cpci.server.crud.repos import get_config
from cpci.server.models import Repository, Result, Run, Shard, as_utc
from cpci.server.views.read_models import HistoryEntry, HistoryPage
from cpci.urls import Links

#: Configs per statement of `observations` (SQLite allows 500 terms in a UNION ALL).
PER_STATEMENT = 100


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
            col(Result.rank_errors),
            col(Result.environment_id),
            col(Run.ci_run_id),
            col(Run.ci_attempt),
            col(Run.commit),
            col(Run.pull_request),
            col(Run.branch),
            col(Shard.uploaded_at),
        )
        .join(Run, col(Result.run_id) == Run.id)
        .join(Shard, col(Result.shard_id) == Shard.id)
        .where(col(Result.config_id) == config.id)
        .order_by(col(Result.id).desc())
        .limit(limit + 1)
    )
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
            run=_link(row.ci_run_id, row.ci_attempt, row.commit, repo.name, links),
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
    config_pks: Sequence[int],
    window: int,
    links: Links,
    exclude_commit: str | None = None,
    pull_request: int | None = None,
) -> dict[int, list[Observation]]:
    """The latest `window` trusted results of each config, oldest first, as the analysis
    reads them: from branch runs (`pull_request IS NULL`), plus `pull_request`'s own runs when
    given. Another PR's runs never count: its upload must not shape this PR's verdict.

    Each config's newest results are read backwards along its (config_id, id) index and the
    reading stops after `window` of them: a config with a long history costs no more than a new
    one (ranking all of its results, then keeping `window`, grew with the history).
    """
    out: dict[int, list[Observation]] = defaultdict(list)
    where = " AND u.pull_request IS NULL"
    also: tuple[int | str, ...] = ()
    if pull_request is not None:
        where, also = " AND (u.pull_request IS NULL OR u.pull_request = ?)", (pull_request,)
    if exclude_commit is not None:
        where, also = where + ' AND u."commit" <> ?', (*also, exclude_commit)
    latest = (
        "SELECT * FROM (SELECT r.id, r.config_id, r.environment_id, r.outcome, r.flaky, "
        'r.rank_errors, u.id, u.ci_run_id, u.ci_attempt, u."commit", u.pull_request '
        f"FROM result r JOIN run u ON u.id = r.run_id WHERE r.config_id = ?{where} "
        "ORDER BY r.id DESC LIMIT ?) AS latest_{n}"
    )
    run_links: dict[tuple[str, int, str], RunLink] = {}  # many configs share each run
    for chunk in chunks(list(config_pks), PER_STATEMENT):
        # Built as text: SQLAlchemy constructs for a hundred subqueries cost more than the query.
        sql = " UNION ALL ".join(latest.format(n=n) for n in range(len(chunk))) + " ORDER BY 1"
        params = [v for config_pk in chunk for v in (config_pk, *also, window)]
        rows = fetch_rows(session, sql, *params)
        for row in rows:
            _, config_pk, env_id, outcome, flaky, errors, run_id, ci_run_id, attempt, commit, pr = (
                row
            )
            link = run_links.get((ci_run_id, attempt, commit))
            if link is None:
                link = _link(ci_run_id, attempt, commit, repo_name, links)
                run_links[(ci_run_id, attempt, commit)] = link
            failed = outcome in FAILING_OUTCOMES and errors is not None
            out[config_pk].append(
                Observation(
                    run=link,
                    run_id=run_id,
                    environment_id=env_id,
                    outcome=outcome,
                    flaky=bool(flaky),
                    on_pull_request=pr is not None,
                    signature=signature(culprit_error(from_json(errors))) if failed else "",
                )
            )
    return out


def _link(ci_run_id: str, ci_attempt: int, commit: str, repo_name: str, links: Links) -> RunLink:
    return RunLink(
        ci_run_id=ci_run_id,
        ci_attempt=ci_attempt,
        commit=commit,
        url=links.run(repo_name, ci_run_id, ci_attempt),
    )
