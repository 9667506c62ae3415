"""Each config's base-branch evidence, read for the runner's evidence summary.

Two reads for the common case: the branch's newest CI runs (`crud.durations.newest_branch_runs`),
then one aggregate over their results per config (runs, passes, failures, reruns that passed).
A config that never failed in them needs nothing more: its record is its passes, no label. Only
the configs that failed or flaked get their history window read and assessed as a PR report
assesses them (`crud.history.observations`, `analysis.flakiness`), so the runner's chance test
and the report's weigh the same record. Runs whose results were rolled up (older than the
retention) count through their days' roll-ups (`crud.rollups.rollup_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from cpci.schema import FlakeRecord
from cpci.server.analysis.flakiness import FlakinessPolicy, assess_flakiness
from cpci.server.crud.common import fetch_rows, one_of
from cpci.server.crud.durations import newest_branch_runs
from cpci.server.crud.history import observations
from cpci.server.crud.rollups import compacted_days, rollup_counts
from cpci.server.packed import outcome_codes
from cpci.urls import Links

#: Outcomes the aggregate counts, as `analysis.observations.Observation` does.
_FAILED = outcome_codes(("failed", "error", "crashed", "timeout"))
_PASSED = outcome_codes(("passed", "xfailed", "xpassed"))


@dataclass(frozen=True)
class ConfigRecord:
    """One config's evidence on the branch: its record, its label, the CI runs it ran in."""

    record: FlakeRecord
    flaky: bool
    runs: int


@dataclass(frozen=True)
class BranchEvidence:
    """Every config the branch's newest `ci_runs` CI runs hold, by config key."""

    ci_runs: int
    newest_commit: str | None
    configs: dict[str, ConfigRecord]


def branch_evidence(
    *,
    session: Session,
    repo_id: int,
    repo_name: str,
    branch: str,
    window: int,
    policy: FlakinessPolicy,
    links: Links,
) -> BranchEvidence:
    """The evidence of every config in the newest `window` CI runs of the trusted `branch`."""
    found = newest_branch_runs(session=session, repo_id=repo_id, branch=branch, runs=window)
    if not found.run_ids:
        return BranchEvidence(0, None, {})
    member, ids = one_of(session, found.run_ids)
    rows = fetch_rows(
        session,
        "SELECT c.id, c.key, COUNT(DISTINCT u.ci_run_id), "
        f"SUM(CASE WHEN r.outcome IN {_PASSED} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN r.outcome IN {_FAILED} OR r.flaky THEN 1 ELSE 0 END) "
        "FROM shard s JOIN run u ON u.id = s.run_id JOIN result r ON r.shard_id = s.id "
        f"JOIN config c ON c.id = r.config_id WHERE s.run_id{member} GROUP BY c.id, c.key",
        ids,
    )
    counts = {
        int(pk): (str(key), int(runs), int(passes), int(bad)) for pk, key, runs, passes, bad in rows
    }
    days = compacted_days(session, found.run_ids)
    for pk, rolled in rollup_counts(session=session, branch=branch, days=days).items():
        _, runs, passes, bad = counts.get(pk, (rolled.key, 0, 0, 0))
        counts[pk] = (rolled.key, runs + rolled.runs, passes + rolled.passes, bad + rolled.failed)
    configs: dict[str, ConfigRecord] = {}
    failing: dict[int, tuple[str, int]] = {}
    for config_pk, (key, runs, passes, bad) in counts.items():
        if bad:
            failing[config_pk] = (key, runs)
        else:
            configs[key] = ConfigRecord(FlakeRecord(failures=0, trials=passes), False, runs)
    histories = observations(
        session=session,
        repo_name=repo_name,
        config_pks=sorted(failing),
        window=window,
        links=links,
        branch=branch,
    )
    for config_pk, (key, runs) in failing.items():
        assessed = assess_flakiness(histories.get(config_pk, []), policy)
        configs[key] = ConfigRecord(assessed.record, assessed.flaky, runs)
    return BranchEvidence(found.ci_runs, found.newest_commit, dict(sorted(configs.items())))
