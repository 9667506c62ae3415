"""One config over time: outcome per commit, durations and metrics, failures grouped by
signature, and pass rates per runner and environment ("works elsewhere" points at a host).

Reads the newest `limit` results through the (config, id) index, so the page costs the same
with a thousand results as with a million. Results older than the retention are daily
aggregates (`cpci.server.rollup`): the page says from which day its raw results start.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from cpci import urls
from cpci.evidence import signature
from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.observations import PASSING_OUTCOMES
from cpci.server.analysis.verdicts import ResultView, state_of
from cpci.server.crud.common import from_json, metric_names, raw_json
from cpci.server.crud.repos import get_config
from cpci.server.crud.rollups import rolled_up_days
from cpci.server.crud.shard_cache import pass_rate
from cpci.server.models import (
    EnvironmentFingerprint,
    Repository,
    Result,
    ResultDetail,
    Run,
    Shard,
    as_utc,
)
from cpci.server.packed import unpack_metrics
from cpci.server.views.read_models import (
    ConfigOverview,
    ConfigPoint,
    EnvironmentPublic,
    PlaceStats,
    RolledUp,
    Signature,
    TimedBy,
    TimelineCell,
)

LIMIT = 400
#: A result's time, best first: its shard's start and end as uploaded, else the upload itself
#: (which a shard always has).
TIMES: tuple[TimedBy, ...] = ("start", "end", "upload")
#: A runner is suspect when it passes less than this while the others pass at least HEALTHY.
SUSPECT, HEALTHY, MIN_RESULTS = 0.5, 0.9, 3


@dataclass(frozen=True)
class _Row:
    result_id: int
    outcome: str
    duration_s: float
    flaky: bool
    metrics: dict[str, float]
    messages: tuple[str, ...]
    environment_id: int
    ci_run_id: str
    commit: str
    branch: str | None
    pull_request: int | None
    runner: str | None
    timed_by: TimedBy
    when: datetime


def config_overview(
    *, session: Session, repo: Repository, key: str, limit: int = LIMIT
) -> ConfigOverview:
    config = get_config(session=session, repo=repo, key=key)
    assert config.id is not None
    rows = _rows(session, config.id, limit)
    runners = _places((r.runner or "(unnamed runner)", r) for r in rows)
    return ConfigOverview(
        repository=repo.name,
        config=key,
        params=config.params or {},
        shown=len(rows),
        timeline=_timeline(repo.name, rows),
        points=[
            ConfigPoint(
                result_id=r.result_id,
                when=r.when,
                timed_by=r.timed_by,
                outcome=r.outcome,
                duration_s=r.duration_s,
                metrics=r.metrics,
                ci_run_id=r.ci_run_id,
                commit=r.commit,
                runner=r.runner,
                page_url=urls.run(repo.name, r.ci_run_id),
            )
            for r in rows
        ],
        signatures=_signatures(repo.name, rows),
        runners=runners,
        environments=_environments(session, rows),
        elsewhere=works_elsewhere(runners),
        aggregates=rolled_up(session, config.id),
    )


def rolled_up(session: Session, config_pk: int) -> RolledUp | None:
    """What of `config_pk`'s history is daily aggregates (None: none), as its pages say."""
    days = rolled_up_days(session, config_pk)
    if days is None:
        return None
    return RolledUp(
        raw_from=days.last + timedelta(days=1),
        days=days.days,
        results=days.results,
        failures=days.failures,
    )


def _rows(session: Session, config_pk: int, limit: int) -> list[_Row]:
    query = (
        sa.select(
            col(Result.id),
            col(Result.outcome),
            col(Result.duration_s),
            col(Result.flaky),
            col(Result.metrics),
            raw_json(col(ResultDetail.rank_errors)),
            col(Shard.environment_id),
            col(Run.ci_run_id),
            col(Run.commit),
            col(Run.branch),
            col(Run.pull_request),
            col(Shard.runner_name),
            col(Shard.started_at),
            col(Shard.ended_at),
            col(Shard.uploaded_at),
        )
        .join(Shard, col(Result.shard_id) == col(Shard.id))
        .join(Run, col(Shard.run_id) == col(Run.id))
        .outerjoin(ResultDetail, col(ResultDetail.result_id) == col(Result.id))
        .where(col(Result.config_id) == config_pk)
        .order_by(col(Result.id).desc())
        .limit(limit)
    )
    out = []
    rows = session.connection().execute(query).all()
    names = metric_names(session, (row[4] for row in rows))
    for row in rows:
        errors = from_json(row[5]) if row[5] is not None else []
        timed_by, when = next(
            (name, at) for name, at in zip(TIMES, row[12:15], strict=True) if at is not None
        )
        out.append(
            _Row(
                result_id=row[0],
                outcome=row[1],
                duration_s=row[2],
                flaky=bool(row[3]),
                metrics=unpack_metrics(row[4], names),
                messages=tuple(str(e.get("message", "")) for e in errors or ()),
                environment_id=row[6],
                ci_run_id=row[7],
                commit=row[8],
                branch=row[9],
                pull_request=row[10],
                runner=row[11],
                timed_by=timed_by,
                when=as_utc(when),
            )
        )
    out.reverse()
    return out


def _timeline(repository: str, rows: list[_Row]) -> list[TimelineCell]:
    by_commit: dict[str, list[_Row]] = {}
    for r in rows:  # oldest first, so a commit's place is its first result
        by_commit.setdefault(r.commit, []).append(r)
    cells = []
    for commit, group in by_commit.items():
        last = group[-1]
        views = [ResultView(r.outcome, r.duration_s, r.flaky) for r in group]
        cells.append(
            TimelineCell(
                commit=commit,
                state=state_of(views),
                outcomes=dict(sorted(Counter(r.outcome for r in group).items())),
                ci_run_id=last.ci_run_id,
                branch=last.branch,
                pull_request=last.pull_request,
                page_url=urls.run(repository, last.ci_run_id),
            )
        )
    return cells


def _signatures(repository: str, rows: list[_Row]) -> list[Signature]:
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    last: dict[str, str] = {}
    for r in rows:
        if r.outcome not in FAILING_OUTCOMES:
            continue
        seen = {signature(m): m for m in (r.messages or ("",))}
        for sig, message in seen.items():
            counts[sig] += 1
            example.setdefault(sig, message)
            last[sig] = r.ci_run_id
    return [
        Signature(
            signature=sig,
            count=n,
            example=example[sig][:2000],
            last_ci_run_id=last[sig],
            last_page_url=urls.run(repository, last[sig]),
        )
        for sig, n in counts.most_common()
    ]


def _places(items: Iterable[tuple[str, _Row]]) -> list[PlaceStats]:
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for name, r in items:
        outcomes[name][r.outcome] += 1
    out = []
    for name, counter in sorted(outcomes.items()):
        tally = dict(counter)
        out.append(
            PlaceStats(
                name=name,
                results=sum(tally.values()),
                passes=sum(n for o, n in tally.items() if o in PASSING_OUTCOMES),
                failures=sum(n for o, n in tally.items() if o in FAILING_OUTCOMES),
                pass_rate=pass_rate(tally),
            )
        )
    return out


def _environments(session: Session, rows: list[_Row]) -> list[PlaceStats]:
    ids = {r.environment_id for r in rows}
    envs = {
        e.id: EnvironmentPublic.of(e)
        for e in session.exec(
            select(EnvironmentFingerprint).where(col(EnvironmentFingerprint.id).in_(ids))
        )
    }
    stats = _places((str(r.environment_id), r) for r in rows)
    return [
        s.model_copy(update={"name": environment_name(env), "environment": env})
        for s in stats
        for env in (envs[int(s.name)],)
    ]


def environment_name(env: EnvironmentPublic) -> str:
    """A short label: the fields that tell environments apart on a GPU fleet."""
    parts: list[Any] = [
        f"torch {env.torch}" if env.torch else None,
        f"CUDA {env.cuda}" if env.cuda else None,
        f"NCCL {env.nccl}" if env.nccl else None,
        env.gpu,
        env.backend,
    ]
    return " · ".join(p for p in parts if p) or f"environment {env.id}"


def works_elsewhere(runners: list[PlaceStats]) -> str | None:
    """Name a runner that mostly fails while the others mostly pass: suspect the host."""
    judged = [
        r for r in runners if r.pass_rate is not None and r.passes + r.failures >= MIN_RESULTS
    ]
    for bad in judged:
        others = [r for r in judged if r is not bad]
        passes = sum(r.passes for r in others)
        counted = passes + sum(r.failures for r in others)
        rate = bad.pass_rate if bad.pass_rate is not None else 1.0
        if rate < SUSPECT and counted and passes / counted >= HEALTHY:
            return (
                f"fails mostly on {bad.name} ({rate:.0%} pass) but passes "
                f"{passes / counted:.0%} elsewhere: suspect that host, not the test"
            )
    return None
