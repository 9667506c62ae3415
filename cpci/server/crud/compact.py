"""Roll raw results older than the retention up into daily aggregates, and delete them.

`compact` works in batches of whole runs (a run's results are the flake record's unit, so no
run is ever split across batches), oldest run first, each batch one transaction: read the
runs' results, add them into their days' `ResultRollup` rows (creating the missing ones),
delete the raw rows. Batches take one lock, so concurrent compactions (two replicas'
background jobs) take turns. An interrupted compaction leaves every batch either done or
untouched; a rerun finds only the runs that still have raw results, so it changes nothing when
there are none. Runs and shards stay (pages link to them); only their results go.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, text
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from cpci.evidence import culprit_error, signature
from cpci.schema import FAILING_OUTCOMES, RunLink
from cpci.server.analysis.flakiness import flake_record
from cpci.server.analysis.observations import Observation
from cpci.server.core.db import writer
from cpci.server.crud.common import chunks, fetch_rows, from_json, one_of
from cpci.server.crud.rollups import utc_day
from cpci.server.models import Result, Run, Shard
from cpci.server.packed import OUTCOME_NAME
from cpci.server.rollup import DurationSketch, ResultRollup

#: Raw results per batch (whole runs: a batch holds at least one run, however large).
BATCH_RESULTS = 20_000
#: Runs counted per query when filling a batch: few, as counting a run's results reads its
#: index entries, and a batch needs only as many runs as fill `BATCH_RESULTS`.
RUNS_PER_QUERY = 32

#: PostgreSQL advisory lock key of compaction batches ("cpci" + "rollup", in ASCII).
COMPACTION_LOCK = 0x63706369_726F6C6C

#: A roll-up row's key: config, environment, branch, pull request (0: none), day.
RollupKey = tuple[int, int, str, int, date]


@dataclass(frozen=True)
class CompactProgress:
    """What a compaction did so far (or, dry, would do): `batches` transactions, `runs` and
    `results` rolled up into `rollups` day rows touched, in `elapsed_s` seconds."""

    batches: int = 0
    runs: int = 0
    results: int = 0
    rollups: int = 0
    elapsed_s: float = 0.0

    @property
    def results_per_s(self) -> float:
        return self.results / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True)
class _OldRun:
    id: int
    branch: str
    pull_request: int
    day: date
    results: int


def compact(
    *,
    engine: Engine,
    before: datetime,
    batch_results: int = BATCH_RESULTS,
    dry_run: bool = False,
    on_batch: Callable[[CompactProgress], None] | None = None,
) -> CompactProgress:
    """Roll up and delete the raw results of every run created before `before`, in batches of
    about `batch_results` results. `on_batch` is called after each batch is committed (a
    progress line; a test stops the compaction there by raising). `dry_run` counts what would
    be compacted and writes nothing."""
    if batch_results < 1:
        raise ValueError(f"batch_results must be >= 1, got {batch_results}")
    started = time.perf_counter()
    progress = CompactProgress()
    cursor = 0
    while True:
        with Session(engine if dry_run else writer(engine)) as session:
            if not dry_run:
                _one_compaction_at_a_time(session)
            batch = _next_batch(session, before, cursor, batch_results)
            if not batch:
                break
            cursor = batch[-1].id
            touched = 0 if dry_run else _roll_up(session, batch)
            if not dry_run:
                session.commit()
        progress = replace(
            progress,
            batches=progress.batches + 1,
            runs=progress.runs + len(batch),
            results=progress.results + sum(r.results for r in batch),
            rollups=progress.rollups + touched,
            elapsed_s=time.perf_counter() - started,
        )
        if on_batch is not None:
            on_batch(progress)
    return replace(progress, elapsed_s=time.perf_counter() - started)


def _one_compaction_at_a_time(session: Session) -> None:
    """Hold the compaction lock for this batch's transaction, so replicas (or a command beside
    the service) never roll the same runs up twice: SQLite's write lock is taken up front
    (`core.db.writer`); PostgreSQL takes a transaction-level advisory lock. The batch is chosen
    after the lock, so it never includes runs another batch has just compacted."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": COMPACTION_LOCK})


def _next_batch(session: Session, before: datetime, after_id: int, size: int) -> list[_OldRun]:
    """The oldest runs after `after_id` created before `before` that still have raw results,
    up to about `size` results of them."""
    batch: list[_OldRun] = []
    total = 0
    while total < size:
        rows = session.execute(
            sa_select(
                col(Run.id),
                col(Run.branch),
                col(Run.pull_request),
                col(Run.created_at),
                func.count(),
            )
            .join(Shard, col(Shard.run_id) == col(Run.id))
            .join(Result, col(Result.shard_id) == col(Shard.id))
            .where(col(Run.created_at) < before, col(Run.id) > after_id)
            .group_by(col(Run.id), col(Run.branch), col(Run.pull_request), col(Run.created_at))
            .order_by(col(Run.id))
            .limit(RUNS_PER_QUERY)
        ).all()
        for run_id, branch, pull_request, created_at, count in rows:
            if batch and total + int(count) > size:
                return batch
            batch.append(
                _OldRun(int(run_id), branch, pull_request or 0, utc_day(created_at), count)
            )
            total += int(count)
            after_id = int(run_id)
        if len(rows) < RUNS_PER_QUERY:
            break
    return batch


def _roll_up(session: Session, batch: Sequence[_OldRun]) -> int:
    """Add `batch`'s results into their roll-up rows and delete them; the roll-up rows touched."""
    runs = {r.id: r for r in batch}
    member, ids = one_of(session, sorted(runs))
    rows = fetch_rows(
        session,
        "SELECT r.id, s.run_id, r.config_id, s.environment_id, r.outcome, r.flaky, r.duration_s, "
        "d.rank_errors FROM shard s JOIN result r ON r.shard_id = s.id "
        f"LEFT JOIN result_detail d ON d.result_id = r.id WHERE s.run_id{member}",
        ids,
    )
    groups: dict[RollupKey, list[tuple[Observation, float]]] = defaultdict(list)
    for _, run_id, config_pk, env_id, code, flaky, seconds, errors in rows:
        run = runs[int(run_id)]
        outcome = OUTCOME_NAME[code]
        failed = outcome in FAILING_OUTCOMES and errors is not None
        observed = Observation(
            run=_NO_LINK,
            run_id=run.id,
            environment_id=int(env_id),
            outcome=outcome,
            flaky=bool(flaky),
            on_pull_request=run.pull_request != 0,
            signature=signature(culprit_error(from_json(errors))) if failed else "",
        )
        key = (int(config_pk), int(env_id), run.branch, run.pull_request, run.day)
        groups[key].append((observed, float(seconds)))
    existing = _rollups(session, groups)
    for key, group in groups.items():
        row = existing.get(key)
        if row is None:
            config_pk, env_id, branch, pull_request, day = key
            row = ResultRollup(
                config_id=config_pk,
                environment_id=env_id,
                branch=branch,
                pull_request=pull_request,
                day=day,
            )
            session.add(row)
        _add(row, group)
    # By the ids read: a late upload's results, stored since, wait for the next pass.
    member, ids = one_of(session, [row[0] for row in rows])
    listed = {"ids": ids}
    in_ids = member.replace("?", ":ids")
    session.execute(text(f"DELETE FROM result_detail WHERE result_id{in_ids}"), listed)
    session.execute(text(f"DELETE FROM result WHERE id{in_ids}"), listed)
    return len(groups)


#: Compaction reads no run pages: the flake record needs run ids, not links.
_NO_LINK = RunLink(ci_run_id="", ci_attempt=0, commit="", url="")


def _rollups(session: Session, groups: dict[RollupKey, Any]) -> dict[RollupKey, ResultRollup]:
    """The existing roll-up rows of `groups`' keys (a day compacted in an earlier batch)."""
    found: dict[RollupKey, ResultRollup] = {}
    configs = sorted({key[0] for key in groups})
    days = sorted({key[4] for key in groups})
    for chunk in chunks(configs, 500):
        for row in session.exec(
            select(ResultRollup).where(
                col(ResultRollup.config_id).in_(chunk), col(ResultRollup.day).in_(days)
            )
        ):
            key = (row.config_id, row.environment_id, row.branch, row.pull_request, row.day)
            if key in groups:
                found[key] = row
    return found


def _add(row: ResultRollup, group: Sequence[tuple[Observation, float]]) -> None:
    """Add one key's raw results into its roll-up row; every figure is a sum."""
    observed = [o for o, _ in group]
    counted = [o for o in observed if o.counted]
    record = flake_record(counted)
    per_run: dict[int, bool] = {}  # failed (or needed a rerun) in the run
    failed_in: set[int] = set()  # kept a failing result in the run
    for o in counted:
        per_run[o.run_id] = per_run.get(o.run_id, False) or o.failed or o.flaky
        if o.failed:
            failed_in.add(o.run_id)
    outcomes = dict(row.outcomes)
    for o in observed:
        outcomes[o.outcome] = outcomes.get(o.outcome, 0) + 1
    signatures = dict(row.signatures)
    for sig, n in record.signatures.items():
        signatures[sig] = signatures.get(sig, 0) + n
    passing = DurationSketch.of(s for o, s in group if o.outcome == "passed")
    row.results += len(observed)
    row.runs += len(per_run)
    row.failed_runs += sum(per_run.values())
    row.rerun_runs += sum(failed and pk not in failed_in for pk, failed in per_run.items())
    row.failures += record.failures
    row.flaky_passes += sum(o.flaky and not o.failed for o in counted)
    row.trials += record.trials
    row.outcomes, row.signatures = outcomes, signatures
    row.durations = DurationSketch(row.durations).merge(passing).stored()
