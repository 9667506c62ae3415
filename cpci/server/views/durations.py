"""The durations endpoint's answer: what every shard of a CI run balances by.

The branch defaults to the one pages show first (the default trusted branch, while it has
runs); a repository or branch without runs answers empty durations, which balance shards by
count, the same on every runner.
"""

from __future__ import annotations

from sqlmodel import Session

from cpci.schema import ConfigDurations
from cpci.server.core.trusted_branches import TrustedBranches
from cpci.server.crud.durations import branch_durations
from cpci.server.models import Repository
from cpci.server.views.dashboard import default_view_branch

#: CI runs read by default, and at most: enough for a stable median, bounded for the query.
DEFAULT_RUNS = 10
MAX_RUNS = 100


def config_durations(
    *,
    session: Session,
    repo: Repository,
    branch: str | None,
    runs: int,
    trusted: TrustedBranches,
) -> ConfigDurations:
    """Median seconds per config node id over the newest `runs` trusted runs of `branch`."""
    assert repo.id is not None
    branch = branch or default_view_branch(session=session, repo=repo, trusted=trusted)
    if branch is None:
        return ConfigDurations(
            repository=repo.name, branch=None, runs=0, newest_commit=None, durations={}
        )
    found = branch_durations(session=session, repo_id=repo.id, branch=branch, runs=runs)
    return ConfigDurations(
        repository=repo.name,
        branch=branch,
        runs=found.runs,
        newest_commit=found.newest_commit,
        durations=found.durations,
    )
