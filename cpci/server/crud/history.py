"""One config's history as the flakiness analysis reads it: its latest trusted results."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlmodel import Session

from cpci.evidence import culprit_error, signature
from cpci.schema import FAILING_OUTCOMES, RunLink
from cpci.server.analysis.observations import Observation
from cpci.server.crud.common import chunks, fetch_rows, from_json
from cpci.server.crud.rollups import rollup_observations
from cpci.server.packed import OUTCOME_NAME
from cpci.urls import Links

#: Configs per statement of `observations` (SQLite allows 500 terms in a UNION ALL).
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
    where = f" AND {branch_runs}"
    if pull_request is not None:
        where, also = f" AND (({branch_runs}) OR u.pull_request = ?)", (*also, pull_request)
    if exclude_commit is not None:
        where, also = where + ' AND u."commit" <> ?', (*also, exclude_commit)
    latest = (
        "SELECT * FROM (SELECT r.id, r.config_id, r.shard_id, r.outcome, r.flaky, "
        'u.id AS run_pk, u.ci_run_id, u.ci_attempt, u."commit", u.pull_request '
        f"FROM result r JOIN run u ON u.id = r.run_id WHERE r.config_id = ?{where} "
        "ORDER BY r.id DESC LIMIT ?) AS latest_{n}"
    )
    # The environment and the details are joined once, around the hundred subqueries: a join
    # in each of them is planned and run a hundred times (twice the time on PostgreSQL).
    around = (
        "SELECT l.id, l.config_id, s.environment_id, l.outcome, l.flaky, d.rank_errors, "
        'l.run_pk, l.ci_run_id, l.ci_attempt, l."commit", l.pull_request FROM ({union}) AS l '
        "JOIN shard s ON s.id = l.shard_id LEFT JOIN result_detail d ON d.result_id = l.id "
        "ORDER BY 1"
    )
    run_links: dict[tuple[str, int, str], RunLink] = {}  # many configs share each run
    for chunk in chunks(list(config_pks), PER_STATEMENT):
        # Built as text: SQLAlchemy constructs for a hundred subqueries cost more than the query.
        union = " UNION ALL ".join(latest.format(n=n) for n in range(len(chunk)))
        sql = around.format(union=union)
        params = [v for config_pk in chunk for v in (config_pk, *also, window)]
        rows = fetch_rows(session, sql, *params)
        for row in rows:
            _, config_pk, env_id, outcome, flaky, errors, run_id, ci_run_id, attempt, commit, pr = (
                row
            )
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


def run_link(ci_run_id: str, ci_attempt: int, commit: str, repo_name: str, links: Links) -> RunLink:
    """A run as a history entry or an observation names it (with its GitHub page)."""
    return RunLink(
        ci_run_id=ci_run_id,
        ci_attempt=ci_attempt,
        commit=commit,
        url=links.run_page(repo_name, ci_run_id, ci_attempt),
    )
