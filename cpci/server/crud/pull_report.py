"""Load what a PR report needs, then hand it to the pure builder in `analysis.pull_report`.

Head: the newest commit the PR uploaded results for, every CI run on it merged by attempt.
Baseline: the PR's base commit, or failing that its nearest first-parent ancestor with results.
Timings are compared with the last few runs of the baseline's branch, not one noisy run.
Both are read by shard ids through the app's `ShardCache`: every PR on the same base shares them,
and the head (its results, keys, order and storms: a storm shard's 160,000 rows) is read once per
set of head shards, so the report, the PR page and each section page after the first do not read
it again (stored shards never change; a new upload is a new set). These bulk reads run with the
cyclic garbage collector paused (`core.gc_pause`: its full passes took half a cold read's time).

Evidence has provenance: the baseline, the timings and the history windows come only from runs
of the PR's base branch, when that branch is trusted (`core.trusted_branches`; a PR run that
names no base branch is compared with the default trusted branch), plus this PR's own earlier
runs for its history; another PR's runs, and other branches' runs, never count. Results are
split by CI matrix leg, so each leg is judged against the base's same leg. The repository's open
quarantines are read with every report: a quarantined config is listed apart and never gates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from cpci.schema import (
    BaselineInfo,
    PullRequestReport,
    QuarantineState,
    ReportSectionName,
    ReportSectionPage,
    ShardProgress,
)
from cpci.server.analysis.pull_report import (
    ConfigLeg,
    ReportInputs,
    build_report,
    build_section,
    needs_history,
    report_order,
    storms_of,
)
from cpci.server.analysis.storms import StormPolicy, Storms
from cpci.server.analysis.verdicts import ResultView
from cpci.server.core.errors import NotFound
from cpci.server.core.gc_pause import gc_paused
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.commits import ancestors
from cpci.server.crud.common import fetch_rows, one_of
from cpci.server.crud.history import observations
from cpci.server.crud.quarantine import open_quarantines
from cpci.server.crud.runs import MergedRun, config_keys, merge_runs, results_of
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.models import Repository, Run, Shard, as_utc
from cpci.server.packed import OUTCOME_CODE
from cpci.urls import Links

#: Values by shard set one PR's report keeps in the cache: its head, its base's results and its
#: base branch's timings (PRs on one base share the last two).
READ_MODELS_PER_PULL = 3


def pull_request_report(
    *,
    session: Session,
    repo: Repository,
    number: int,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> PullRequestReport:
    """The PR's report, each section capped at `policy.judge.section_cap` items."""
    inputs = _inputs(session, repo, number, policy, links, cache)
    return build_report(inputs, policy.judge)


def pull_request_section(
    *,
    session: Session,
    repo: Repository,
    number: int,
    section: ReportSectionName,
    offset: int,
    limit: int,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> ReportSectionPage:
    """One page of one section of the PR's report: the items past the report's cap."""
    inputs = _inputs(session, repo, number, policy, links, cache)
    return build_section(inputs, policy.judge, section, offset, limit)


def warm_pull_report(
    *,
    session: Session,
    repository: str,
    number: int,
    commit: str,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> bool:
    """Read what PR `number`'s report keeps per set of shards into `cache` (its head, its base's
    results and timings) right after an upload completed a run of it, so the first read after
    the upload (the Action's report mode, the bot, a reviewer) is as fast as the ones after it.

    Only when `commit` is the PR's newest head (what its report reads): a late upload of an
    older commit changes nothing a report shows. True when it read."""
    repo = session.exec(select(Repository).where(Repository.name == repository)).first()
    if repo is None:
        return False
    latest = _latest_run(session, repo, number)
    if latest is None or latest.commit != commit:
        return False
    _read_models(session, repo, latest, policy, links, cache)
    return True


def _latest_run(session: Session, repo: Repository, number: int) -> Run | None:
    run: Run | None = session.exec(
        select(Run)
        .where(Run.repository_id == repo.id, Run.pull_request == number)
        .order_by(col(Run.id).desc())
        .limit(1)
    ).first()
    return run


@dataclass(frozen=True)
class _ReadModels:
    """What a report reads through the cache, kept per set of shards: all but the histories."""

    head_runs: list[MergedRun]
    head: _Head
    base_branch: str | None  # the trusted branch the PR is judged by (None: its base is not)
    baseline: BaselineInfo
    base_run: MergedRun | None
    base: dict[ConfigLeg, list[ResultView]] | None
    base_samples: dict[ConfigLeg, list[float]]


def _read_models(
    session: Session,
    repo: Repository,
    latest: Run,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> _ReadModels:
    head_runs = merge_runs(
        session=session,
        runs=session.exec(
            select(Run).where(
                Run.repository_id == repo.id,
                Run.pull_request == latest.pull_request,
                Run.commit == latest.commit,
            )
        ).all(),
    )
    storms = policy.judge.storms
    head_shards = [s for m in head_runs for s in m.uploads]
    head = cache.of_shards(
        "pull_head",
        (s.id for s in head_shards if s.id is not None),
        lambda: _head(session, head_shards, storms),
        variant=storms,
    )
    trust, lookback = policy.trusted, policy.lookback
    wanted = latest.base_branch or trust.default_branch(repo.default_branch)
    base_branch = wanted if trust.trusts(wanted, repo.default_branch) else None
    base_run: MergedRun | None = None
    if base_branch is not None:
        baseline, base_run = _baseline(
            session, repo, latest.base_commit, base_branch, lookback.ancestor_depth, links
        )
    else:
        note = (
            f"the base branch {wanted} is not a trusted branch ({trust.describe()}): "
            "its runs judge no pull request"
        )
        baseline = BaselineInfo(
            requested_commit=latest.base_commit,
            used_commit=None,
            commits_behind=None,
            run=None,
            note=note,
        )
    base = None
    if base_run is not None:
        uploads = base_run.uploads
        base = cache.of_shards(
            "results_by_leg",
            (s.id for s in uploads if s.id is not None),
            lambda: _by_leg(session, uploads),
        )
    # Only configs that passed at head are timed: with none, the base's timings go unread.
    samples = (
        _base_samples(session, cache, base_run, lookback.baseline_runs)
        if base_run is not None and head.passed_any
        else {}
    )
    return _ReadModels(head_runs, head, base_branch, baseline, base_run, base, samples)


def _inputs(
    session: Session,
    repo: Repository,
    number: int,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
) -> ReportInputs:
    latest = _latest_run(session, repo, number)
    if latest is None:
        raise NotFound(f"no results for pull request #{number} of {repo.name} yet")
    read = _read_models(session, repo, latest, policy, links, cache)
    head = read.head
    histories = observations(
        session=session,
        repo_name=repo.name,
        config_pks=head.needs_history,
        window=policy.lookback.window,
        links=links,
        branch=read.base_branch,
        exclude_commit=latest.commit,
        pull_request=number,
    )
    return ReportInputs(
        repository=repo.name,
        pull_request=number,
        head_commit=latest.commit,
        head_runs=[m.ref(repo.name, links) for m in read.head_runs],
        shards=_progress(read.head_runs),
        baseline=read.baseline,
        configs=head.configs,
        head=head.results,
        base=read.base,
        histories=histories,
        base_samples=read.base_samples,
        history_url=lambda key: links.history(repo.name, key),
        shard_of=head.shard_of,
        base_runs=frozenset(
            r.id for r in (read.base_run.runs if read.base_run else ()) if r.id is not None
        ),
        storms=head.storms,
        order=head.order,
        quarantined=_quarantines(session, repo),
    )


def _quarantines(session: Session, repo: Repository) -> dict[str, QuarantineState]:
    """The repository's open quarantines, read on every report (never cached: a maintainer's
    quarantine or its release by evidence changes the next report, with no upload between)."""
    assert repo.id is not None
    held = open_quarantines(session=session, repo_id=repo.id)
    return {
        key: QuarantineState(since=as_utc(q.added_at), by=q.added_by, reason=q.reason)
        for key, q in held.items()
    }


@dataclass(frozen=True)
class _Head:
    """What a report reads of its head shards alone, kept per set of them (shared: read-only)."""

    results: dict[ConfigLeg, list[ResultView]]
    shard_of: dict[ConfigLeg, int]  # the shard index each config ran on
    configs: dict[int, str]  # config keys
    order: list[ConfigLeg]  # `report_order`
    storms: Storms
    needs_history: list[int]  # the failing configs, but for those caught in an infra storm
    passed_any: bool  # some config passed (a storm's head may hold no passing result at all)


@gc_paused()
def _head(session: Session, shards: Sequence[Shard], policy: StormPolicy) -> _Head:
    shard_of: dict[ConfigLeg, int] = {}
    results = _by_leg(session, shards, shard_of)
    configs = config_keys(session=session, ids={at.pk for at in results})
    storms = storms_of(results, shard_of, policy)
    caught = storms.of.get
    # A config caught in an infra storm is INFRA whatever its history: not loaded for it.
    failing = {
        at.pk
        for at, rs in results.items()
        if ((s := caught(at)) is None or s.infra_rule is None) and needs_history(rs)
    }
    return _Head(
        results=results,
        shard_of=shard_of,
        configs=configs,
        order=report_order(results, configs),
        storms=storms,
        needs_history=sorted(failing),
        passed_any=any(r.outcome == "passed" for rs in results.values() for r in rs),
    )


@gc_paused()
def _by_leg(
    session: Session, shards: Sequence[Shard], shard_of: dict[ConfigLeg, int] | None = None
) -> dict[ConfigLeg, list[ResultView]]:
    """Results by config and CI matrix leg, one query per shard index and leg; `shard_of`,
    when given, is filled with the shard index each config ran on (for storms)."""
    out: dict[ConfigLeg, list[ResultView]] = {}
    places = sorted({(s.leg, s.shard_index) for s in shards})
    for leg, index in places:
        group = [s for s in shards if s.leg == leg and s.shard_index == index]
        results = results_of(session=session, shards=group, failed_durations=False)
        placed = {ConfigLeg(pk, leg): rs for pk, rs in results.items()}
        for at in placed.keys() & out.keys():  # a config on two shards of one leg: both
            placed[at] = out[at] + placed[at]
        out.update(placed)
        if shard_of is not None:
            shard_of.update(dict.fromkeys(placed, index))
    return out


def _progress(runs: Sequence[MergedRun]) -> ShardProgress:
    parts = [m.progress for m in runs]
    missing = sorted({i for p in parts for i in p.missing})
    return ShardProgress(
        reported=sum(p.reported for p in parts),
        expected=sum(p.expected for p in parts),
        missing=missing,
        plan_mismatches=[x for p in parts for x in p.plan_mismatches],
    )


def _baseline(
    session: Session, repo: Repository, base: str | None, branch: str, depth: int, links: Links
) -> tuple[BaselineInfo, MergedRun | None]:
    """The complete run of the trusted `branch` at `base`, else at its nearest first-parent
    ancestor with one."""
    if base is None:
        note = "the upload named no base commit, so there is nothing to compare with"
        return BaselineInfo(
            requested_commit=None, used_commit=None, commits_behind=None, run=None, note=note
        ), None
    assert repo.id is not None
    candidates = [base, *ancestors(session=session, repo_id=repo.id, commit=base, depth=depth)]
    for behind, commit in enumerate(candidates):
        runs = session.exec(
            select(Run).where(
                Run.repository_id == repo.id,
                Run.commit == commit,
                Run.branch == branch,  # the trusted base branch's runs only
                col(Run.pull_request).is_(None),
            )
        ).all()
        complete = [m for m in merge_runs(session=session, runs=runs) if m.progress.complete]
        if complete:
            chosen = complete[0]
            note = (
                f"base {base[:12]} on {branch}"
                if behind == 0
                else f"no results at base {base[:12]} on {branch}; used ancestor "
                f"{commit[:12]}, {behind} commit(s) behind"
            )
            info = BaselineInfo(
                requested_commit=base,
                used_commit=commit,
                commits_behind=behind,
                run=chosen.ref(repo.name, links),
                note=note,
            )
            return info, chosen
    searched = len(candidates) - 1
    note = (
        f"no complete run of {branch} at base {base[:12]} nor any of the {searched} known "
        "ancestor(s)"
        if searched
        else f"no complete run of {branch} at base {base[:12]} and no known ancestors of it"
    )
    info = BaselineInfo(
        requested_commit=base, used_commit=None, commits_behind=None, run=None, note=note
    )
    return info, None


def _base_samples(
    session: Session, cache: ShardCache, base: MergedRun, count: int
) -> dict[ConfigLeg, list[float]]:
    """Passing results of the last `count` branch runs up to the baseline run, for timings
    (which are noisy, so one base run is not enough; metrics are compared with the base run),
    per config and matrix leg: an A100 is not timed against an H100."""
    run = base.latest
    query = select(Run.id).where(
        Run.repository_id == run.repository_id,
        col(Run.pull_request).is_(None),
        Run.branch == run.branch,
        col(Run.id) <= run.id,
    )
    run_ids = session.exec(query.order_by(col(Run.id).desc()).limit(count)).all()
    if not run_ids:
        return {}
    member, values = one_of(session, run_ids)
    shards = fetch_rows(session, f"SELECT id FROM shard WHERE run_id{member}", values)
    shard_ids = [pk for (pk,) in shards]
    return cache.of_shards(
        "passed_durations_by_leg", shard_ids, lambda: _passed_durations(session, shard_ids)
    )


@gc_paused()
def _passed_durations(session: Session, shard_ids: list[int]) -> dict[ConfigLeg, list[float]]:
    if not shard_ids:
        return {}
    out: dict[ConfigLeg, list[float]] = defaultdict(list)
    member, values = one_of(session, shard_ids)
    rows = fetch_rows(
        session,
        "SELECT r.config_id, s.leg, r.duration_s FROM result r JOIN shard s ON s.id = r.shard_id "
        f"WHERE r.shard_id{member} AND r.outcome = {OUTCOME_CODE['passed']}",
        values,
    )
    for config_id, leg, duration in rows:
        out[ConfigLeg(config_id, leg)].append(duration)
    return dict(out)  # shared through the cache: a defaultdict would grow on lookups
