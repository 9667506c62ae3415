"""One CI run, two views: the summary bots read (outcome counts, failing configs) and the run
page in full: its shards (reported or missing), the torchrun worlds each started, where
the time went, and its results filtered, sorted and paged in the database.

World start-up (init) time comes from the runner: each result names its world and that world's
launch-to-first-config time. "Other" is derived: a shard's wall time (`ended_at - started_at`)
less init and test time. With several worlds running at once the sums can exceed the wall time,
and then nothing is derived.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TypedDict

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

from cpci import urls
from cpci.schema import FAILING_OUTCOMES, RunRef, first_line
from cpci.server.analysis.infra import infra_signature
from cpci.server.analysis.verdicts import culprit_of, first_message
from cpci.server.crud.common import from_json, raw_json
from cpci.server.crud.runs import (
    MergedRun,
    config_keys,
    environments_of,
    load_run,
    results_of,
)
from cpci.server.models import Config, Repository, Result, Shard, as_utc
from cpci.server.views.read_models import (
    EnvironmentPublic,
    FailingConfig,
    ResultRow,
    RunDetail,
    RunProvenance,
    RunSummary,
    ShardRow,
    Sort,
)
from cpci.urls import Links

PER_PAGE = 100
TIMING_NOTE = (
    "World start-up is each world's launch to its first config (process start, import torch, "
    "process-group init, collection), as the runner measured it. 'Other' is the shard's wall time "
    "less start-up and tests (teardown, gaps), shown only when the shard reported its start and "
    "end and its worlds did not overlap."
)
_SORTS = {
    "config": col(Config.key),
    "outcome": col(Result.outcome),
    "duration": col(Result.duration_s),
}


def run_summary(*, session: Session, repo: Repository, ci_run_id: str, links: Links) -> RunSummary:
    merged = load_run(session=session, repo=repo, ci_run_id=ci_run_id)
    results = results_of(session=session, shards=merged.shards.values())
    keys = config_keys(session=session, ids=results)
    outcomes: Counter[str] = Counter(r.outcome for rs in results.values() for r in rs)
    failing = []
    for pk, rs in sorted(results.items(), key=lambda item: keys[item[0]]):
        bad = [r for r in rs if r.outcome in FAILING_OUTCOMES]
        if bad:
            rule = infra_signature(bad[0].outcome, (culprit_of(bad[0]),))
            failing.append(
                FailingConfig(
                    config=keys[pk],
                    config_pk=pk,
                    history_url=links.history(repo.name, keys[pk]),
                    outcome=bad[0].outcome,
                    message=first_message(bad),
                    infra_rule=rule.name if rule else None,
                )
            )
    return RunSummary(
        **_header(session, repo, merged, links, outcomes),
        configs=len(results),
        failing=failing,
    )


class _Header(TypedDict):
    """The fields of `RunHeader`, which both views of a run start with."""

    repository: str
    run: RunRef
    attempts: list[int]
    environments: list[EnvironmentPublic]
    outcomes: dict[str, int]


def _header(
    session: Session, repo: Repository, merged: MergedRun, links: Links, outcomes: Counter[str]
) -> _Header:
    envs = environments_of(session=session, merged=merged)
    return _Header(
        repository=repo.name,
        run=merged.ref(repo.name, links),
        attempts=[r.ci_attempt for r in merged.runs],
        environments=[EnvironmentPublic.of(e) for e in envs],
        outcomes=dict(sorted(outcomes.items())),
    )


def run_detail(
    *,
    session: Session,
    repo: Repository,
    ci_run_id: str,
    links: Links,
    outcomes: Sequence[str] = (),
    query: str = "",
    sort: Sort = "config",
    page: int = 1,
    per_page: int = PER_PAGE,
) -> RunDetail:
    merged = load_run(session=session, repo=repo, ci_run_id=ci_run_id)
    shards = _shards(session, merged)
    shard_ids = [s.id for s in merged.shards.values()]
    where: list[sa.ColumnElement[bool]] = [col(Result.shard_id).in_(shard_ids)]
    if outcomes:
        where.append(col(Result.outcome).in_(list(outcomes)))
    if query:
        where.append(func.lower(col(Config.key)).contains(query.lower(), autoescape=True))
    matching = session.exec(
        select(func.count()).select_from(Result).join(Config).where(*where)
    ).one()
    pages = max(1, math.ceil(matching / per_page))
    page = min(page, pages)
    order = _SORTS[sort.lstrip("-")]
    rows = session.connection().execute(
        sa.select(
            col(Config.key),
            col(Result.outcome),
            col(Result.duration_s),
            col(Result.attempt),
            col(Result.flaky),
            raw_json(col(Result.rank_errors)),
            raw_json(col(Result.batch)),
            col(Shard.shard_index),
        )
        .join(Config, col(Result.config_id) == col(Config.id))
        .join(Shard, col(Result.shard_id) == col(Shard.id))
        .where(*where)
        .order_by(order.desc() if sort.startswith("-") else order, col(Result.id))
        .offset((page - 1) * per_page)
        .limit(per_page)
    )
    results = [
        ResultRow(
            config=key,
            outcome=outcome,
            duration_s=duration,
            attempt=attempt,
            flaky=bool(flaky),
            message=_first_message(from_json(errors) if errors is not None else None),
            batch=_batch_label(from_json(batch) if batch is not None else None),
            shard=shard,
            page_url=urls.config(repo.name, key),
        )
        for key, outcome, duration, attempt, flaky, errors, batch, shard in rows
    ]
    total: Counter[str] = Counter()
    for s in shards:
        total.update(s.outcomes)
    first = merged.runs[0]
    return RunDetail(
        **_header(session, repo, merged, links, total),
        provenance=RunProvenance(
            via=first.upload_via,
            uploaded_by=first.uploaded_by,
            event=first.upload_event,
            ref=first.upload_ref,
            workflow=first.upload_workflow,
            fork=first.fork,
        ),
        ci_run_url=links.ci_run(repo.name, merged.latest.ci_run_id, merged.latest.ci_attempt),
        shards=shards,
        worlds=sum(s.worlds for s in shards),
        timing_note=TIMING_NOTE,
        results=results,
        matching=matching,
        page=page,
        pages=pages,
        per_page=per_page,
        outcome_filter=list(outcomes),
        query=query,
        sort=sort,
    )


def _shards(session: Session, merged: MergedRun) -> list[ShardRow]:
    attempt_of = {r.id: r.ci_attempt for r in merged.runs}
    outcomes: dict[int, Counter[str]] = defaultdict(Counter)
    test_s: dict[int, float] = defaultdict(float)
    worlds: dict[int, dict[tuple[int, int], float | None]] = defaultdict(dict)
    ids = [s.id for s in merged.shards.values()]
    rows = session.connection().execute(
        sa.select(
            col(Result.shard_id),
            col(Result.outcome),
            col(Result.duration_s),
            raw_json(col(Result.batch)),
        ).where(col(Result.shard_id).in_(ids))
    )
    for shard_id, outcome, duration, batch in rows:
        outcomes[shard_id][outcome] += 1
        test_s[shard_id] += duration
        info = from_json(batch) if batch is not None else None
        if info:
            world = (int(info.get("index", 0)), int(info.get("world", 0)))
            worlds[shard_id][world] = info.get("start_s")
    out = []
    slots = [(leg, i) for leg in merged.legs for i in range(merged.latest.shard_total)]
    for leg, index in slots:
        shard = merged.shards.get((leg, index))
        if shard is None or shard.id is None:
            out.append(
                ShardRow(
                    leg=leg,
                    index=index,
                    state="missing",
                    attempt=None,
                    runner=None,
                    labels=[],
                    environment_id=None,
                    started_at=None,
                    ended_at=None,
                    wall_s=None,
                    init_s=None,
                    test_s=0.0,
                    other_s=None,
                    worlds=0,
                    results=0,
                    outcomes={},
                )
            )
            continue
        started = as_utc(shard.started_at) if shard.started_at else None
        ended = as_utc(shard.ended_at) if shard.ended_at else None
        wall = (ended - started).total_seconds() if started and ended else None
        starts = [s for s in worlds[shard.id].values() if s is not None]
        init = round(sum(starts), 3) if starts else None
        spent = test_s[shard.id] + (init or 0.0)
        out.append(
            ShardRow(
                leg=leg,
                index=index,
                state="reported",
                attempt=attempt_of.get(shard.run_id),
                runner=shard.runner_name,
                labels=list(shard.runner_labels or []),
                environment_id=shard.environment_id,
                started_at=started,
                ended_at=ended,
                wall_s=wall,
                init_s=init,
                test_s=round(test_s[shard.id], 3),
                other_s=round(wall - spent, 3) if wall is not None and wall >= spent else None,
                worlds=len(worlds[shard.id]),
                results=shard.result_count,
                outcomes=dict(sorted(outcomes[shard.id].items())),
            )
        )
    return out


def _first_message(errors: list[dict[str, object]] | None) -> str | None:
    for e in errors or ():
        text = first_line(str(e.get("message", "")))
        if text:
            return text
    return None


def _batch_label(batch: dict[str, int] | None) -> str | None:
    if not batch:
        return None
    return f"batch {batch.get('index')} · world {batch.get('world')} · {batch.get('size')} cfg"
