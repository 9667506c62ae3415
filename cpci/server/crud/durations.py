"""Per-config durations of a branch's recent trusted runs: what shards are balanced by.

Two reads, each along an index: the branch's newest runs (`ix_run_repo_branch`), then the passing
results of those runs (`ix_result_run_id`) as plain (node id, seconds) rows. The median is taken
here rather than in SQL: SQLite has no percentile aggregate, one code path serves both engines,
and the rows are a few per config (one per run read). Runs whose results were rolled up (older
than the retention) are read from their days' roll-ups (`crud.rollups.rollup_durations`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from sqlmodel import Session

from cpci.server.crud.common import fetch_rows, one_of
from cpci.server.crud.rollups import compacted_days, rollup_durations
from cpci.server.packed import OUTCOME_CODE
from cpci.server.rollup import DurationSketch

#: Attempts of one CI run are separate run rows; read this many rows per CI run wanted.
ATTEMPTS_PER_RUN = 4


@dataclass(frozen=True)
class BranchDurations:
    """Median seconds per node id over `runs` CI runs, the newest of them on `newest_commit`."""

    runs: int
    newest_commit: str | None
    durations: dict[str, float]


@dataclass(frozen=True)
class BranchRuns:
    """The stored run ids (every attempt) of a branch's newest `ci_runs` CI runs, the newest of
    them on `newest_commit`."""

    run_ids: list[int]
    ci_runs: int
    newest_commit: str | None


def newest_branch_runs(*, session: Session, repo_id: int, branch: str, runs: int) -> BranchRuns:
    """The newest `runs` CI runs of `branch` (every attempt of each), trusted ones only: a PR's
    runs never count."""
    rows = fetch_rows(
        session,
        'SELECT id, ci_run_id, "commit" FROM run WHERE repository_id = ? AND branch = ? '
        "AND pull_request IS NULL ORDER BY id DESC LIMIT ?",
        repo_id,
        branch,
        runs * ATTEMPTS_PER_RUN,
    )
    wanted: dict[str, None] = {}
    run_ids: list[int] = []
    for run_id, ci_run_id, _ in rows:
        if ci_run_id not in wanted and len(wanted) == runs:
            continue
        wanted[ci_run_id] = None
        run_ids.append(int(run_id))
    return BranchRuns(run_ids, len(wanted), str(rows[0][2]) if rows else None)


def branch_durations(*, session: Session, repo_id: int, branch: str, runs: int) -> BranchDurations:
    """The median duration of each config's passing results over the newest `runs` CI runs of
    `branch` (`newest_branch_runs`)."""
    found = newest_branch_runs(session=session, repo_id=repo_id, branch=branch, runs=runs)
    if not found.run_ids:
        return BranchDurations(0, None, {})
    membership, ids = one_of(session, found.run_ids)
    seconds: dict[str, list[float]] = defaultdict(list)
    for nodeid, duration in fetch_rows(
        session,
        "SELECT c.nodeid, r.duration_s FROM shard s JOIN result r ON r.shard_id = s.id "
        f"JOIN config c ON c.id = r.config_id WHERE s.run_id{membership} "
        f"AND r.outcome = {OUTCOME_CODE['passed']}",
        ids,
    ):
        seconds[nodeid].append(float(duration))
    medians = {nodeid: statistics.median(values) for nodeid, values in seconds.items()}
    compacted = compacted_days(session, found.run_ids)
    for nodeid, sketch in rollup_durations(session=session, branch=branch, days=compacted).items():
        # Within the sketch's error (`rollup.RELATIVE_ERROR`) of the raw median.
        medians[nodeid] = DurationSketch.of(seconds.get(nodeid, ())).merge(sketch).median()
    return BranchDurations(found.ci_runs, found.newest_commit, dict(sorted(medians.items())))
