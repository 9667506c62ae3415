"""What the culprit analysis reads: a trusted branch's first-parent chain from its tip, and
configs' results on it.

The tip is the commit of the branch's newest run, unless another recent run's commit descends
from it: a bisection run uploads an older commit of the branch after the tip's run, and must
not make the chain start below the tip.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session

from cpci.server.analysis.observations import Observation
from cpci.server.crud.commits import ancestor_chains
from cpci.server.crud.common import fetch_rows
from cpci.server.crud.history import observations
from cpci.urls import Links

#: Recent run commits looked at for the tip.
TIP_CANDIDATES = 20


def branch_chain(*, session: Session, repo_id: int, branch: str, depth: int) -> list[str]:
    """Up to `depth` + 1 commits of `branch`'s first-parent chain, tip first (empty: no runs):
    two queries, the recent runs' commits and all their chains at once."""
    rows = fetch_rows(
        session,
        'SELECT "commit" FROM run WHERE repository_id = ? AND branch = ? '
        "AND pull_request IS NULL ORDER BY id DESC LIMIT ?",
        repo_id,
        branch,
        TIP_CANDIDATES,
    )
    recent = list(dict.fromkeys(str(r[0]) for r in rows))
    if not recent:
        return []
    below = ancestor_chains(session=session, repo_id=repo_id, commits=recent, depth=depth)
    chain = [recent[0], *below[recent[0]]]
    for commit in recent[1:]:
        if commit not in chain and chain[0] in below[commit]:
            chain = [commit, *below[commit]]
    return chain[: depth + 1]


def chain_histories(
    *,
    session: Session,
    repo_name: str,
    config_pks: Sequence[int],
    branch: str,
    window: int,
    links: Links,
) -> dict[int, list[Observation]]:
    """Each config's newest `window` results on `branch`'s own runs, oldest first (one read for
    all of them: the dashboard weighs every config failing at the tip at once)."""
    return observations(
        session=session,
        repo_name=repo_name,
        config_pks=config_pks,
        window=window,
        links=links,
        branch=branch,
    )
