"""The repository dashboard: recent runs of a branch, their pass-rate trend, the configs broken
on it (a trusted branch: "broken since", from the culprit analysis), flaky and slow configs, and
pull requests with a quick verdict.

Outcome counts come from the per-shard digests, so a warm dashboard reads only the run and
shard tables; the flakiness of the configs that failed recently is assessed from their history
exactly as the PR verdicts assess it. A PR's quick verdict is its PR report's, summed up
through the verdict table (remembered until the next upload): the dashboard and the report
can never disagree.
"""

from __future__ import annotations

import functools
from collections import Counter

from sqlmodel import Session, col, func, select

from cpci import urls
from cpci.github.gate import failing_configs
from cpci.schema.verdicts import count_text, quick_verdict
from cpci.server.core.policies import PullReportPolicy
from cpci.server.core.trusted_branches import TrustedBranches
from cpci.server.crud.pull_report import pull_request_report
from cpci.server.crud.runs import MergedRun, config_keys, merge_runs
from cpci.server.crud.shard_cache import ShardCache, repository_version
from cpci.server.models import Repository, Result, Run, as_utc
from cpci.server.views.culprit import branch_culprits
from cpci.server.views.flaky import assess_configs
from cpci.server.views.read_models import (
    BrokenRow,
    Dashboard,
    FlakyRow,
    PullRow,
    RunRow,
    SlowRow,
)
from cpci.urls import Links

TREND_RUNS = 50
TOP = 10
FLAKY_CANDIDATES = 100
PULLS = 10
BRANCH_SAMPLE = 200
#: Configs failing at the tip weighed for "broken since" (a storm's thousands are not).
BROKEN_CANDIDATES = 50


def default_view_branch(
    *, session: Session, repo: Repository, trusted: TrustedBranches
) -> str | None:
    """The branch pages show when none is asked for: the default trusted branch, or, while it
    has no runs (a repository whose default branch GitHub has not reported, on `master`), the
    branch most of the recent non-PR runs were on."""
    branch = trusted.default_branch(repo.default_branch)
    has_runs = session.exec(
        select(Run.id)
        .where(Run.repository_id == repo.id, col(Run.pull_request).is_(None), Run.branch == branch)
        .limit(1)
    ).first()
    return branch if has_runs is not None else _busiest_branch(session, repo)


def _busiest_branch(session: Session, repo: Repository) -> str | None:
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
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> Dashboard:
    """The dashboard of `branch` (None: the one pages show first, `default_view_branch`);
    its flaky rows and PR verdicts are judged by `policy`, as the PR reports are."""
    branch = branch or default_view_branch(session=session, repo=repo, trusted=policy.trusted)
    merged = branch_runs(session=session, repo=repo, branch=branch, limit=TREND_RUNS)
    rows: list[RunRow] = []
    failed_in: Counter[int] = Counter()
    failing_at_tip: list[int] = []
    for m in merged:
        tally = cache.tally(session=session, shard_ids=[s.id for s in m.shards.values() if s.id])
        failed_in.update(tally.failing | tally.rerun_flaky)
        if m is merged[0]:
            failing_at_tip = sorted(tally.failing)
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
        ("flaky", repo.id, branch, policy.lookback.window),
        version,
        lambda: _flaky(session, repo, branch, failed_in, policy, links),
    )
    trusted = branch is not None and policy.trusted.trusts(branch, repo.default_branch)
    broken = (
        cache.remember(
            ("broken", repo.id, branch),
            version,
            lambda: _broken(session, repo, branch, failing_at_tip, policy, links),
        )
        if trusted and branch is not None and failing_at_tip
        else []
    )
    return Dashboard(
        repository=repo.name,
        branch=branch,
        runs=rows,
        flaky=flaky,
        slowest=_slowest(session, repo, merged[0]) if merged else [],
        pulls=_pulls(session, repo, cache, policy, links),
        broken=broken,
    )


def _broken(
    session: Session,
    repo: Repository,
    branch: str,
    failing: list[int],
    policy: PullReportPolicy,
    links: Links,
) -> list[BrokenRow]:
    """The configs failing at the tip that the culprit analysis says broke (not a flake)."""
    keys = config_keys(session=session, ids=failing[:BROKEN_CANDIDATES])
    found = branch_culprits(
        session=session, repo=repo, keys=keys, branch=branch, policy=policy, links=links
    )
    return [
        BrokenRow(
            config=key,
            first_bad=c.first_bad,
            last_good=c.last_good,
            untested=len(c.untested),
            culprit=c.culprit,
            reason=c.reason,
            page_url=urls.config(repo.name, key),
        )
        for key, c in sorted(found.items())
        if c.status == "broken" and c.first_bad is not None and c.last_good is not None
    ]


def _flaky(
    session: Session,
    repo: Repository,
    branch: str | None,
    failed_in: Counter[int],
    policy: PullReportPolicy,
    links: Links,
) -> list[FlakyRow]:
    chosen = [pk for pk, _ in failed_in.most_common(FLAKY_CANDIDATES)]
    found = assess_configs(
        session=session,
        repo=repo,
        branch=branch,
        config_pks=chosen,
        flakiness=policy.flakiness,
        window=policy.lookback.window,
        links=links,
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


def _pulls(
    session: Session, repo: Repository, cache: ShardCache, policy: PullReportPolicy, links: Links
) -> list[PullRow]:
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
    assert repo.id is not None
    version = repository_version(session=session, repo_id=repo.id)
    out = []
    for run in sorted(latest, key=lambda r: -(r.id or 0)):
        number = run.pull_request
        assert number is not None
        report = cache.remember(
            ("pull_report", repo.id, number),
            version,
            functools.partial(
                pull_request_report,
                session=session,
                repo=repo,
                number=number,
                policy=policy,
                links=links,
                cache=cache,
            ),
        )
        counts = report.counts.by_verdict
        out.append(
            PullRow(
                number=number,
                head_commit=report.head_commit,
                branch=run.branch,
                updated_at=as_utc(run.created_at),
                shards=report.shards,
                failing=failing_configs(report),
                failing_at_base_too=(
                    report.total("broken_at_base") if report.baseline.used_commit else None
                ),
                by_verdict=counts,
                summary=count_text(counts),
                verdict=quick_verdict(counts, report.status == "pending"),
                page_url=urls.pull(repo.name, number),
            )
        )
    return out
