"""One config's history as the flakiness analysis reads it: its latest trusted results."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from sqlmodel import Session

from cpci.evidence import culprit_error, signature
from cpci.schema import FAILING_OUTCOMES, RunLink
from cpci.server.analysis.observations import Observation
from cpci.server.crud.common import chunks, fetch_rows, from_json
from cpci.server.crud.rollups import rollup_observations
from cpci.server.packed import OUTCOME_NAME
from cpci.urls import Links

#: Configs per statement of `observations` on SQLite (its UNION ALL allows 500 terms).
PER_STATEMENT = 100


def observations(
    *,
    session: Session,
    repo_name: str,
    config_pks: Sequence[int],
    window: int,
    links: Links,
    branch: str | None,
    exclude_commit: str | None = None,
    pull_request: int | None = None,
) -> dict[int, list[Observation]]:
    """The latest `window` trusted results of each config, oldest first, as the analysis
    reads them: from the runs of the trusted `branch` (None: no branch's), plus
    `pull_request`'s own runs when given. Another PR's runs, and other branches' runs, never
    count: their uploads must not shape this PR's verdict (`core.trusted_branches`).

    Each config's newest results are read backwards along its (config_id, id) index and the
    reading stops after `window` of them: a config with a long history costs no more than a new
    one (ranking all of its results, then keeping `window`, grew with the history). A config
    with fewer raw results than `window` gets whole days of its roll-ups before them
    (`crud.rollups.rollup_observations`: results older than the retention).
    """
    out: dict[int, list[Observation]] = defaultdict(list)
    branch_runs = "u.pull_request IS NULL AND u.branch = ?" if branch is not None else "1 = 0"
    also: tuple[int | str, ...] = () if branch is None else (branch,)
    trusted = branch_runs
    if pull_request is not None:
        trusted, also = f"(({branch_runs}) OR u.pull_request = ?)", (*also, pull_request)
    if exclude_commit is not None:
        trusted, also = trusted + ' AND u."commit" <> ?', (*also, exclude_commit)
    run_links: dict[tuple[str, int, str], RunLink] = {}  # many configs share each run
    for row in _newest_results(session, config_pks, window, trusted, also):
        _, config_pk, env_id, outcome, flaky, errors, run_id, ci_run_id, attempt, commit, pr = row
        link = run_links.get((ci_run_id, attempt, commit))
        if link is None:
            link = run_link(ci_run_id, attempt, commit, repo_name, links)
            run_links[(ci_run_id, attempt, commit)] = link
        outcome = OUTCOME_NAME[outcome]
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
    held = {pk: len(out.get(pk, ())) for pk in config_pks}
    short = {pk: window - n for pk, n in held.items() if n < window}
    older = rollup_observations(
        session=session, wanted=short, branch=branch, pull_request=pull_request
    )
    for config_pk, days in older.items():
        out[config_pk] = days + out.get(config_pk, [])
    return out


def _newest_results(
    session: Session,
    config_pks: Sequence[int],
    window: int,
    trusted: str,
    params: Sequence[int | str],
) -> Iterator[tuple[Any, ...]]:
    """Rows of `observations`, each config's newest `window` results whose run (`u`) meets
    `trusted` (with its `params`), ordered by result id: the result's id, config, environment,
    outcome, flaky, rank errors, and its run's id, CI run id, attempt, commit, pull request."""
    if not config_pks:
        return
    # The run, the environment and the details are joined once, around the newest results:
    # a join in each config's reading is planned and run once per config.
    around = (
        "SELECT l.id, l.config_id, s.environment_id, l.outcome, l.flaky, d.rank_errors, "
        'u.id, u.ci_run_id, u.ci_attempt, u."commit", u.pull_request FROM {latest} '
        "JOIN run u ON u.id = l.run_id JOIN shard s ON s.id = l.shard_id "
        "LEFT JOIN result_detail d ON d.result_id = l.id ORDER BY 1"
    )
    newest = "SELECT r.id, r.config_id, r.shard_id, r.run_id, r.outcome, r.flaky FROM result r"
    if session.get_bind().dialect.name == "postgresql":
        # One statement, planned once, read a config at a time. The run is tested per result
        # (a subquery, never a join): on statistics older than the newest runs (a bulk load,
        # a restore, a fresh migration) PostgreSQL reckoned a branch's runs a handful, drove
        # the join from them and read every result of the config once per run (seconds per
        # hundred configs at 320 results each, where this reads 50 of them).
        latest = (
            f"unnest(?::integer[]) AS k(config_id) CROSS JOIN LATERAL ({newest} "
            f"WHERE r.config_id = k.config_id AND (SELECT {trusted} FROM run u "
            "WHERE u.id = r.run_id) ORDER BY r.id DESC LIMIT ?) AS l"
        )
        yield from fetch_rows(
            session, around.format(latest=latest), list(config_pks), *params, window
        )
        return
    # SQLite has no LATERAL: a subquery per config, built as text (SQLAlchemy constructs for a
    # hundred of them cost more than the query). Its planner starts from the config's index
    # whatever it knows of the runs, so the run can be a join there.
    for chunk in chunks(config_pks, PER_STATEMENT):
        union = " UNION ALL ".join(
            f"SELECT * FROM ({newest} JOIN run u ON u.id = r.run_id WHERE r.config_id = ? "
            f"AND {trusted} ORDER BY r.id DESC LIMIT ?) AS latest_{n}"
            for n in range(len(chunk))
        )
        values = [v for config_pk in chunk for v in (config_pk, *params, window)]
        yield from fetch_rows(session, around.format(latest=f"({union}) AS l"), *values)


def run_link(ci_run_id: str, ci_attempt: int, commit: str, repo_name: str, links: Links) -> RunLink:
    """A run as a history entry or an observation names it (with its GitHub page)."""
    return RunLink(
        ci_run_id=ci_run_id,
        ci_attempt=ci_attempt,
        commit=commit,
        url=links.run_page(repo_name, ci_run_id, ci_attempt),
    )
