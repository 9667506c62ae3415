"""Reads of the daily roll-ups (`cpci.server.rollup`), for the reads of raw results to extend.

A config's history (`crud.history.observations`) that holds fewer raw results than its window
is extended backwards by whole days of roll-ups, each day given back as observations the
analysis weighs as it weighs raw ones: one per rolled-up run, its failures and passes spread
over them, the signatures on the failures. What a day keeps exactly is what the flake record
and the chance test read: attempts, failures, signatures, passes, runs and failing runs. What it
cannot keep is the order of its runs and their commits: a roll-up day adds no flips and no
same-commit evidence beyond its own failing runs that also passed, and its observations are
passes and failures (a timeout comes back as a failure; skips are left out, as the analysis
leaves them out; the row's `outcomes` keeps every outcome's count).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from sqlmodel import Session

from cpci.schema import RunLink
from cpci.server.analysis.observations import Observation
from cpci.server.crud.common import fetch_rows, from_json, one_of
from cpci.server.models import as_utc
from cpci.server.rollup import DurationSketch

#: Aggregate run ids are negative (no stored run has one), increasing with the day.
_DAY_IDS = 1_000_000
_EPOCH = 800_000  # a day ordinal after every date this service stores


def aggregate_label(day: date) -> str:
    """How a roll-up day names the runs it stands for, on pages and in evidence."""
    return f"daily aggregate {day.isoformat()}"


def rollup_observations(
    *,
    session: Session,
    wanted: Mapping[int, int],
    branch: str | None,
    pull_request: int | None = None,
) -> dict[int, list[Observation]]:
    """Observations of the newest roll-up days of each config in `wanted`, oldest first, whole
    days until they hold at least `wanted[config]` results: `branch`'s runs (None: none) and
    `pull_request`'s own."""
    scopes: list[str] = []
    params: list[str | int] = []
    if branch is not None:
        scopes.append("(pull_request = 0 AND branch = ?)")
        params.append(branch)
    if pull_request is not None:
        scopes.append("pull_request = ?")
        params.append(pull_request)
    if not wanted or not scopes:
        return {}
    member, ids = one_of(session, sorted(wanted))
    rows = fetch_rows(
        session,
        "SELECT config_id, environment_id, pull_request, day, results, runs, failed_runs, "
        "rerun_runs, failures, flaky_passes, trials, signatures "
        f"FROM result_rollup WHERE config_id{member} "
        f"AND ({' OR '.join(scopes)}) ORDER BY config_id, day DESC, pull_request, environment_id",
        ids,
        *params,
    )
    kept: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    held: dict[int, int] = defaultdict(int)
    last_day: dict[int, date] = {}
    for row in rows:
        config_pk, day = int(row[0]), utc_day(row[3])
        if held[config_pk] >= wanted[config_pk] and last_day.get(config_pk) != day:
            continue  # whole days: the day that filled the window is kept to its end
        kept[config_pk].append(row)
        held[config_pk] += int(row[4])
        last_day[config_pk] = day
    return {pk: _observations(list(reversed(days))) for pk, days in kept.items()}


def compacted_days(session: Session, run_ids: Sequence[int]) -> set[date]:
    """The UTC days of those of `run_ids` whose results were rolled up (none left raw)."""
    if not run_ids:
        return set()
    member, ids = one_of(session, run_ids)
    rows = fetch_rows(
        session,
        f"SELECT u.created_at FROM run u WHERE u.id{member} AND NOT EXISTS (SELECT 1 FROM shard "
        "s JOIN result r ON r.shard_id = s.id WHERE s.run_id = u.id)",
        ids,
    )
    return {utc_day(created_at) for (created_at,) in rows}


@dataclass(frozen=True)
class RollupCounts:
    """One config's rolled-up record over some days: runs it counted in, passes, failures
    and flaky passes (what `crud.evidence` aggregates over raw results)."""

    key: str
    runs: int
    passes: int
    failed: int


def rollup_counts(
    *, session: Session, branch: str, days: Collection[date]
) -> dict[int, RollupCounts]:
    """Per config, the roll-ups of `branch`'s own runs on `days`, summed."""
    if not days:
        return {}
    member, values = one_of(session, sorted(d.isoformat() for d in days))
    rows = fetch_rows(
        session,
        "SELECT c.id, c.key, SUM(ro.runs), SUM(ro.trials - ro.failures), "
        "SUM(ro.failures + ro.flaky_passes) FROM result_rollup ro "
        "JOIN config c ON c.id = ro.config_id WHERE ro.pull_request = 0 AND ro.branch = ? "
        f"AND ro.day{member} GROUP BY c.id, c.key",
        branch,
        values,
    )
    return {int(pk): RollupCounts(str(key), int(r), int(p), int(f)) for pk, key, r, p, f in rows}


@dataclass(frozen=True)
class RolledUpDays:
    """What a config's roll-ups hold, over every branch: their first and last day, the days,
    the results and the failed attempts."""

    first: date
    last: date
    days: int
    results: int
    failures: int


def rolled_up_days(session: Session, config_pk: int) -> RolledUpDays | None:
    """A summary of `config_pk`'s roll-ups, None when it has none (retention off, or nothing
    old enough)."""
    (row,) = fetch_rows(
        session,
        "SELECT MIN(day), MAX(day), COUNT(DISTINCT day), SUM(results), SUM(failures) "
        "FROM result_rollup WHERE config_id = ?",
        config_pk,
    )
    if row[0] is None:
        return None
    return RolledUpDays(utc_day(row[0]), utc_day(row[1]), int(row[2]), int(row[3]), int(row[4]))


def rollup_durations(
    *, session: Session, branch: str, days: Collection[date]
) -> dict[str, DurationSketch]:
    """The passing durations of `branch`'s own runs rolled up on `days`, per node id."""
    if not days:
        return {}
    member, values = one_of(session, sorted(d.isoformat() for d in days))
    sketches: dict[str, DurationSketch] = defaultdict(DurationSketch)
    for nodeid, durations in fetch_rows(
        session,
        "SELECT c.nodeid, ro.durations FROM result_rollup ro JOIN config c ON c.id = ro.config_id "
        f"WHERE ro.pull_request = 0 AND ro.branch = ? AND ro.day{member}",
        branch,
        values,
    ):
        sketches[str(nodeid)].merge(DurationSketch(from_json(durations)))
    return dict(sketches)


def utc_day(value: object) -> date:
    """A UTC day from a raw `date` or `created_at` column: SQLite's text (stored in UTC),
    psycopg's date or aware datetime."""
    if isinstance(value, datetime):
        return as_utc(value).astimezone(timezone.utc).date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _observations(days: Sequence[tuple[Any, ...]]) -> list[Observation]:
    """One day row after another (oldest first) as observations, one pseudo-run per rolled-up
    run, so that the flake record, the runs, the failing runs, the passes and the failures read
    from them are the raw ones: the runs a rerun's hidden failure failed hold a flaky pass
    each, the other failing runs the failures (signatures on them in turn) and the remaining
    flaky passes, the passing runs the plain passes (every run does where none passed)."""
    out: list[Observation] = []
    offset: dict[date, int] = defaultdict(int)
    for row in days:
        env_id, pull_request, day = int(row[1]), int(row[2]), utc_day(row[3])
        runs, failed_runs, rerun_runs, failures, flaky_passes, trials = map(int, row[5:11])
        signatures = [s for s, n in (from_json(row[11]) or {}).items() for _ in range(int(n))]
        failing = failed_runs - rerun_runs  # runs that kept a failing result
        passing = runs - failed_runs
        plain = trials - failures - flaky_passes
        extra_flaky = flaky_passes - rerun_runs
        first = offset[day]
        offset[day] += runs
        for k in range(runs):
            name = f"{aggregate_label(day)} #{first + k + 1}"
            common: dict[str, Any] = {
                "run": RunLink(ci_run_id=name, ci_attempt=1, commit=name, url=""),
                "run_id": (day.toordinal() - _EPOCH) * _DAY_IDS + first + k,
                "environment_id": env_id,
                "on_pull_request": pull_request != 0,
            }
            if k < rerun_runs:
                fails, flaky = 0, 1 + (_share(extra_flaky, rerun_runs, k) if not failing else 0)
            elif k < failed_runs:
                j = k - rerun_runs
                fails = _share(failures - rerun_runs, failing, j)
                flaky = _share(extra_flaky, failing, j)
            else:
                fails = flaky = 0
            if passing:
                passes = _share(plain, passing, k - failed_runs) if k >= failed_runs else 0
            else:
                passes = _share(plain, runs, k)
            for _ in range(fails):
                sig = signatures.pop(0) if signatures else ""
                out.append(Observation(outcome="failed", signature=sig, **common))
            out.extend(Observation(outcome="passed", flaky=True, **common) for _ in range(flaky))
            out.extend(Observation(outcome="passed", **common) for _ in range(passes))
    return out


def _share(total: int, slots: int, k: int) -> int:
    """Slot `k`'s part of `total` spread as evenly as whole numbers go over `slots`."""
    return total // slots + (k < total % slots)
