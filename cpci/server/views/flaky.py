"""A branch's flaky configs: those that failed in its recent runs and whose history on that
branch, assessed by `analysis.flakiness`, earns the label (with its evidence). The branch is the
default trusted branch unless the reader names another. Pull requests' runs never count, nor
other branches': a PR's work in progress is not the repository's flakiness, and one PR's upload
must not label a config that another PR then breaks."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.common import chunks
from cpci.server.crud.history import observations
from cpci.server.crud.runs import config_keys
from cpci.server.models import Repository, Result, Run, Shard
from cpci.server.views.read_models import FlakyConfig, FlakyList
from cpci.urls import Links

MAX_CANDIDATES = 500


def flaky_configs(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    window_runs: int,
    policy: PullReportPolicy,
    links: Links,
) -> FlakyList:
    """The flaky configs of `branch` (None: the default trusted branch), by the PR reports'
    flakiness policy and history window."""
    branch = branch or policy.trusted.default_branch(repo.default_branch)
    run_ids = session.exec(
        select(Run.id)
        .where(Run.repository_id == repo.id, col(Run.pull_request).is_(None), Run.branch == branch)
        .order_by(col(Run.id).desc())
        .limit(window_runs)
    ).all()
    candidates: set[int] = set()
    for chunk in chunks(list(run_ids)):
        candidates.update(
            session.exec(
                select(Result.config_id)
                .join(Shard, col(Shard.id) == col(Result.shard_id))
                .where(col(Shard.run_id).in_(chunk))
                .where(col(Result.outcome).in_(FAILING_OUTCOMES) | col(Result.flaky))
                .distinct()
            ).all()
        )
    chosen = sorted(candidates)[:MAX_CANDIDATES]
    found = assess_configs(
        session=session,
        repo=repo,
        branch=branch,
        config_pks=chosen,
        flakiness=policy.flakiness,
        window=policy.lookback.window,
        links=links,
    )
    return FlakyList(repository=repo.name, window_runs=window_runs, configs=found)


def assess_configs(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    config_pks: Sequence[int],
    flakiness: FlakinessPolicy,
    window: int,
    links: Links,
) -> list[FlakyConfig]:
    """The flaky ones among `config_pks` (config row ids) by their last `window` results on
    `branch`, with evidence, strongest first (also the web UI's dashboard, which picks its
    candidates from the failures of its branch's recent runs)."""
    histories = observations(
        session=session,
        repo_name=repo.name,
        config_pks=config_pks,
        window=window,
        links=links,
        branch=branch,
    )
    keys = config_keys(session=session, ids=config_pks)
    found = []
    for pk in config_pks:
        assessment = assess_flakiness(histories.get(pk, []), flakiness)
        if assessment.flaky:
            found.append(
                FlakyConfig(
                    config=keys[pk],
                    config_pk=pk,
                    history_url=links.history(repo.name, keys[pk]),
                    assessment=assessment,
                )
            )
    found.sort(key=lambda f: (-len(f.assessment.same_commit), -f.assessment.lower_bound))
    return found
