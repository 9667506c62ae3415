"""A config's culprit on a trusted branch (`cpci.schema.CulpritRange`), for the API, the
config page and the bisection driver (`cpci culprit`).

From the trusted branch's own runs and first-parent links only (`views.evidence.trusted_branch`
refuses any other branch, naming the rule): blaming a commit on a branch whose uploads nobody
vouches for would let anyone point the bisection anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import Session

from cpci.schema.culprit import CulpritRange
from cpci.server.analysis.culprit import find_culprit
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.culprit import branch_chain, chain_histories
from cpci.server.crud.repos import get_config
from cpci.server.models import Repository
from cpci.server.views.evidence import trusted_branch
from cpci.urls import Links

#: First-parent commits read below the tip: twice the uploader's ancestry depth per upload.
DEPTH = 100
#: Results per commit read at most (the first attempt and the runner's reruns).
RESULTS_PER_COMMIT = 3


def config_culprit(
    *,
    session: Session,
    repo: Repository,
    key: str,
    branch: str | None,
    policy: PullReportPolicy,
    links: Links,
) -> CulpritRange:
    """Where `key` broke on the trusted `branch` (default: the default trusted branch)."""
    chosen = trusted_branch(repo, branch, policy)
    config = get_config(session=session, repo=repo, key=key)
    assert config.id is not None
    found = branch_culprits(
        session=session, repo=repo, keys={config.id: key}, branch=chosen, policy=policy, links=links
    )
    return found[key]


def branch_culprits(
    *,
    session: Session,
    repo: Repository,
    keys: Mapping[int, str],
    branch: str,
    policy: PullReportPolicy,
    links: Links,
) -> dict[str, CulpritRange]:
    """Each config's culprit on the trusted `branch` (the caller checked the trust), by key:
    the chain read once, every config's history in one read."""
    assert repo.id is not None
    chain = branch_chain(session=session, repo_id=repo.id, branch=branch, depth=DEPTH)
    history = chain_histories(
        session=session,
        repo_name=repo.name,
        config_pks=list(keys),
        branch=branch,
        window=len(chain) * RESULTS_PER_COMMIT,
        links=links,
    )
    return {
        key: find_culprit(
            repository=repo.name,
            branch=branch,
            config=key,
            chain=chain,
            history=history.get(pk, []),
            policy=policy.judge.evidence,
        )
        for pk, key in keys.items()
    }
