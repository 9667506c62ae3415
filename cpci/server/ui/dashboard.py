"""The repository dashboard: recent runs of a branch, their pass-rate trend, flaky and slow
configs, and pull requests with a quick verdict.

Outcome counts come from the per-shard digests, so a warm dashboard reads only the run and
shard tables; the flakiness of the configs that failed recently is assessed from their history
exactly as the PR verdicts assess it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlmodel import Session, col, func, select

from cpci.server.core.config import Settings
from cpci.server.crud.flaky import assess_configs
from cpci.server.crud.runs import MergedRun, config_keys, merge_runs
from cpci.server.links import Links
from cpci.server.models import Repository, Result, Run, as_utc
from cpci.server.ui import urls
from cpci.server.ui.digests import DigestCache, repository_version
from cpci.server.ui.models import (
    Dashboard,
    FlakyRow,
    PullRow,
    QuickVerdict,
    RunRow,
    SlowRow,
)

TREND_RUNS = 50
TOP = 10
FLAKY_CANDIDATES = 100
PULLS = 10
BRANCH_SAMPLE = 200


def default_branch(*, session: Session, repo: Repository) -> str | None:
    """The branch most of the recent non-PR runs were on (the service is not told the default)."""
    recent = (
        select(Run.branch)
        .where(Run.repository_id == repo.id, col(Run.pull_request).is_(None))
        .where(col(Run.branch).is_not(None))
        .order_by(col(Run.id).desc())
        .limit(BRANCH_SAMPLE)
        .subquery()
    )
    count = func.count()
    row = session.exec(
        select(recent.c.branch, count).group_by(recent.c.branch).order_by(count.desc()).limit(1)
    ).first()
    return None if row is None else str(row[0])


def branch_runs(
    *, session: Session, repo: Repository, branch: str | None, limit: int
) -> list[MergedRun]:
    """The newest `limit` CI runs of `branch` (not PRs), every attempt of each merged."""
    query = select(Run.ci_run_id).where(
        Run.repository_id == repo.id, col(Run.pull_request).is_(None)
    )
    query = query.where(col(Run.branch).is_(None) if branch is None else col(Run.branch) == branch)
    ids = list(dict.fromkeys(session.exec(query.order_by(col(Run.id).desc()).limit(limit * 2))))
    runs = session.exec(
        select(Run).where(Run.repository_id == repo.id, col(Run.ci_run_id).in_(ids[:limit]))
    ).all()
    return merge_runs(session=session, runs=runs)


def build_dashboard(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    settings: Settings,
    links: Links,
    cache: DigestCache,
) -> Dashboard:
    branch = branch or default_branch(session=session, repo=repo)
    merged = branch_runs(session=session, repo=repo, branch=branch, limit=TREND_RUNS)
    rows: list[RunRow] = []
    failed_in: Counter[int] = Counter()
    for m in merged:
        tally = cache.tally(session=session, shard_ids=[s.id for s in m.shards.values() if s.id])
        failed_in.update(tally.failing | tally.rerun_flaky)
        rows.append(
            RunRow(
                run=m.ref(repo.name, links),
                created_at=as_utc(m.latest.created_at),
                outcomes=tally.outcomes,
                results=tally.results,
                failing=len(tally.failing),
                pass_rate=tally.pass_rate,
                page_url=urls.run(repo.name, m.latest.ci_run_id),
            )
        )
    assert repo.id is not None
    version = repository_version(session=session, repo_id=repo.id)
    flaky = cache.remember(
        ("flaky", repo.id, branch, settings.flaky_window), version,
        lambda: _flaky(session, repo, failed_in, settings, links),
    )  # fmt: skip
    return Dashboard(
        repository=repo.name,
        branch=branch,
        runs=rows,
        flaky=flaky,
        slowest=_slowest(session, repo, merged[0]) if merged else [],
        pulls=_pulls(session, repo, cache),
    )


def _flaky(
    session: Session, repo: Repository, failed_in: Counter[int], settings: Settings, links: Links
) -> list[FlakyRow]:
    chosen = [pk for pk, _ in failed_in.most_common(FLAKY_CANDIDATES)]
    found = assess_configs(
        session=session, repo=repo, config_ids=chosen, settings=settings, links=links
    )
    return [
        FlakyRow(
            config=f.config,
            score=f.assessment.lower_bound,
            flip_rate=f.assessment.flip_rate,
            runs=f.assessment.runs,
            failures=f.assessment.failures,
            same_commit=len(f.assessment.same_commit),
            reason=f.assessment.reason,
            page_url=urls.config(repo.name, f.config),
        )
        for f in found[:TOP]
    ]


def _slowest(session: Session, repo: Repository, newest: MergedRun) -> list[SlowRow]:
    shard_ids = [s.id for s in newest.shards.values()]
    rows = session.exec(
        select(Result.config_id, Result.duration_s, Result.outcome)
        .where(col(Result.shard_id).in_(shard_ids))
        .order_by(col(Result.duration_s).desc())
        .limit(TOP)
    ).all()
    keys = config_keys(session=session, ids=[r[0] for r in rows])
    return [
        SlowRow(
            config=keys[pk],
            duration_s=duration,
            outcome=outcome,
            page_url=urls.config(repo.name, keys[pk]),
        )
        for pk, duration, outcome in rows
    ]


def _pulls(session: Session, repo: Repository, cache: DigestCache) -> list[PullRow]:
    newest = func.max(Run.id)
    latest_ids = [
        run_id
        for _, run_id in session.exec(
            select(Run.pull_request, newest)
            .where(Run.repository_id == repo.id, col(Run.pull_request).is_not(None))
            .group_by(col(Run.pull_request))
            .order_by(newest.desc())
            .limit(PULLS)
        )
    ]
    latest = session.exec(select(Run).where(col(Run.id).in_(latest_ids))).all()
    out = []
    for run in sorted(latest, key=lambda r: -(r.id or 0)):
        assert run.pull_request is not None
        head = _merged_at(session, repo, run.commit, run.pull_request)
        tally = cache.tally(session=session, shard_ids=_latest_shards(head))
        pending = not all(m.progress.complete for m in head)
        base = _complete_base(session, repo, run.base_commit)
        both = None
        if base is not None:
            base_failing = cache.tally(session=session, shard_ids=_latest_shards([base])).failing
            both = len(tally.failing & base_failing)
        out.append(
            PullRow(
                number=run.pull_request,
                head_commit=run.commit,
                branch=run.branch,
                updated_at=as_utc(run.created_at),
                shards=head[0].progress,
                failing=len(tally.failing),
                failing_at_base_too=both,
                verdict=quick_verdict(pending, len(tally.failing), both),
                page_url=urls.pull(repo.name, run.pull_request),
            )
        )
    return out


def quick_verdict(pending: bool, failing: int, failing_at_base: int | None) -> QuickVerdict:
    """From outcomes alone: the PR page has the full verdict (flakiness, infra, timings)."""
    if pending:
        return "pending"
    if not failing:
        return "passing"
    if failing_at_base is not None and failing_at_base < failing:
        return "new_failures"
    return "failing"


def _merged_at(session: Session, repo: Repository, commit: str, pr: int | None) -> list[MergedRun]:
    query = select(Run).where(Run.repository_id == repo.id, Run.commit == commit)
    if pr is not None:
        query = query.where(Run.pull_request == pr)
    return merge_runs(session=session, runs=session.exec(query).all())


def _complete_base(session: Session, repo: Repository, base: str | None) -> MergedRun | None:
    if base is None:
        return None
    complete = [m for m in _merged_at(session, repo, base, None) if m.progress.complete]
    return complete[0] if complete else None


def _latest_shards(runs: Sequence[MergedRun]) -> list[int]:
    return [s.id for m in runs for s in m.shards.values() if s.id is not None]
