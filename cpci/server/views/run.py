"""One CI run, two views: the summary bots read (outcome counts, failing configs) and the run
page in full: its shards (reported or missing), the torchrun worlds each started, where
the time went, and its results filtered, sorted and paged in the database.

Both count a config by its final record on each shard (its highest attempt: what it came to),
and its reruns apart; the results they list are every attempt.

World start-up (init) time comes from the runner: each result names its world and that world's
launch-to-first-config time. "Other" is derived: a shard's wall time (`ended_at - started_at`)
less init and test time. With several worlds running at once the sums can exceed the wall time,
and then nothing is derived.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
from cpci.server.models import Config, Repository, Result, ResultDetail, Shard, as_utc
from cpci.server.packed import unpack_batch
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
    tallies = _tallies(session, merged)
    # A config fails where its final record on some shard does: one that passed on a rerun is
    # flaky, not failing. Its message is that final record's.
    failed_at = {pk: attempt for t in tallies.values() for pk, (attempt, _) in t.failing.items()}
    results = results_of(session=session, shards=merged.shards.values())
    keys = config_keys(session=session, ids=results)
    failing = []
    for pk in sorted(failed_at, key=keys.__getitem__):
        bad = [
            r for r in results[pk] if r.outcome in FAILING_OUTCOMES and r.attempt == failed_at[pk]
        ]
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
        **_header(session, repo, merged, links, tallies.values()),
        configs=len(results),
        failing=failing,
    )


@dataclass
class _Tally:
    """What one shard's results come to. `configs`: each config by its final record (its
    highest attempt, the later on a tie, as `cpci.schema.final_records` picks it); `failing`:
    the configs whose final record failed, with its attempt and outcome; `reruns`: the results
    of attempt 2 and later."""

    configs: Counter[str] = field(default_factory=Counter)
    flaky: int = 0
    results: Counter[str] = field(default_factory=Counter)
    reruns: Counter[str] = field(default_factory=Counter)
    failing: dict[int, tuple[int, str]] = field(default_factory=dict)
    test_s: float = 0.0
    worlds: dict[tuple[int, int], float | None] = field(default_factory=dict)


def _tallies(session: Session, merged: MergedRun) -> dict[int, _Tally]:
    """Each of the run's chosen shards' `_Tally`, by shard id, from one query."""
    out: dict[int, _Tally] = defaultdict(_Tally)
    final: dict[tuple[int, int], tuple[int, str, bool]] = {}
    ids = [s.id for s in merged.shards.values()]
    rows = session.connection().execute(
        sa.select(
            col(Result.shard_id),
            col(Result.config_id),
            col(Result.attempt),
            col(Result.outcome),
            col(Result.flaky),
            col(Result.duration_s),
            col(Result.batch),
        )
        .where(col(Result.shard_id).in_(ids))
        .order_by(col(Result.id))
    )
    for shard_id, config_pk, attempt, outcome, flaky, duration, batch in rows:
        tally = out[shard_id]
        tally.results[outcome] += 1
        if attempt > 1:
            tally.reruns[outcome] += 1
        tally.test_s += duration
        info = unpack_batch(batch)
        if info:
            world = (int(info.get("index", 0)), int(info.get("world", 0)))
            tally.worlds[world] = info.get("start_s")
        held = final.get((shard_id, config_pk))
        if held is None or attempt >= held[0]:
            final[(shard_id, config_pk)] = (attempt, outcome, bool(flaky))
    for (shard_id, config_pk), (attempt, outcome, flaky) in final.items():
        tally = out[shard_id]
        tally.configs[outcome] += 1
        tally.flaky += flaky
        if outcome in FAILING_OUTCOMES:
            tally.failing[config_pk] = (attempt, outcome)
    return out


class _Header(TypedDict):
    """The fields of `RunHeader`, which both views of a run start with."""

    repository: str
    run: RunRef
    attempts: list[int]
    environments: list[EnvironmentPublic]
    outcomes: dict[str, int]
    flaky: int
    reruns: dict[str, int]
    result_outcomes: dict[str, int]


def _header(
    session: Session,
    repo: Repository,
    merged: MergedRun,
    links: Links,
    tallies: Iterable[_Tally],
) -> _Header:
    envs = environments_of(session=session, merged=merged)
    configs: Counter[str] = Counter()
    reruns: Counter[str] = Counter()
    results: Counter[str] = Counter()
    flaky = 0
    for t in tallies:
        configs.update(t.configs)
        reruns.update(t.reruns)
        results.update(t.results)
        flaky += t.flaky
    return _Header(
        repository=repo.name,
        run=merged.ref(repo.name, links),
        attempts=[r.ci_attempt for r in merged.runs],
        environments=[EnvironmentPublic.of(e) for e in envs],
        outcomes=dict(sorted(configs.items())),
        flaky=flaky,
        reruns=dict(sorted(reruns.items())),
        result_outcomes=dict(sorted(results.items())),
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
    tallies = _tallies(session, merged)
    shards = _shards(merged, tallies)
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
            raw_json(col(ResultDetail.rank_errors)),
            col(Result.batch),
            col(Shard.shard_index),
        )
        .join(Config, col(Result.config_id) == col(Config.id))
        .join(Shard, col(Result.shard_id) == col(Shard.id))
        .outerjoin(ResultDetail, col(ResultDetail.result_id) == col(Result.id))
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
            batch=_batch_label(unpack_batch(batch)),
            shard=shard,
            page_url=urls.config(repo.name, key),
        )
        for key, outcome, duration, attempt, flaky, errors, batch, shard in rows
    ]
    first = merged.runs[0]
    return RunDetail(
        **_header(session, repo, merged, links, tallies.values()),
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


def _shards(merged: MergedRun, tallies: dict[int, _Tally]) -> list[ShardRow]:
    attempt_of = {r.id: r.ci_attempt for r in merged.runs}
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
                    reruns=0,
                    outcomes={},
                )
            )
            continue
        started = as_utc(shard.started_at) if shard.started_at else None
        ended = as_utc(shard.ended_at) if shard.ended_at else None
        wall = (ended - started).total_seconds() if started and ended else None
        tally = tallies.get(shard.id) or _Tally()
        starts = [s for s in tally.worlds.values() if s is not None]
        init = round(sum(starts), 3) if starts else None
        spent = tally.test_s + (init or 0.0)
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
                test_s=round(tally.test_s, 3),
                other_s=round(wall - spent, 3) if wall is not None and wall >= spent else None,
                worlds=len(tally.worlds),
                results=shard.result_count,
                reruns=tally.reruns.total(),
                outcomes=dict(sorted(tally.configs.items())),
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
