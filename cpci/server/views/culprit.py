"""A config's culprit on a trusted branch (`cpci.schema.CulpritRange`), for the API, the
config page and the bisection driver (`cpci culprit`).

From the trusted branch's own runs and first-parent links only (`views.evidence.trusted_branch`
refuses any other branch, naming the rule): blaming a commit on a branch whose uploads nobody
vouches for would let anyone point the bisection anywhere.
"""

from __future__ import annotations

from sqlmodel import Session

from cpci.schema.culprit import CulpritRange
from cpci.server.analysis.culprit import find_culprit
from cpci.server.core.policies import PullReportPolicy
from cpci.server.crud.culprit import branch_chain, chain_history
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
    assert repo.id is not None
    chosen = trusted_branch(repo, branch, policy)
    config = get_config(session=session, repo=repo, key=key)
    assert config.id is not None
    chain = branch_chain(session=session, repo_id=repo.id, branch=chosen, depth=DEPTH)
    history = chain_history(
        session=session,
        repo_name=repo.name,
        config_pk=config.id,
        branch=chosen,
        window=len(chain) * RESULTS_PER_COMMIT,
        links=links,
    )
    return find_culprit(
        repository=repo.name,
        branch=chosen,
        config=key,
        chain=chain,
        history=history,
        policy=policy.judge.evidence,
    )
