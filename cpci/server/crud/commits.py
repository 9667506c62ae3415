"""First-parent commit links: where a PR's base has no results, the nearest tested ancestor
is used instead, and the report says how many commits behind it is."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, select

from cpci.server.crud.common import insert_missing
from cpci.server.models import CommitParent


def record_parents(*, session: Session, repo_id: int, links: Sequence[tuple[str, str]]) -> int:
    """Store (commit, first parent) pairs; known commits keep their first-recorded parent."""
    rows = [{"repository_id": repo_id, "commit": c, "parent": p} for c, p in links]
    insert_missing(
        session=session,
        model=CommitParent,
        rows=rows,
        keys=["repository_id", "commit"],
    )
    return len(rows)


def ancestors(*, session: Session, repo_id: int, commit: str, depth: int) -> list[str]:
    """Up to `depth` first-parent ancestors of `commit`, nearest first."""
    chain: list[str] = []
    current = commit
    while len(chain) < depth:
        parent = session.exec(
            select(CommitParent.parent).where(
                CommitParent.repository_id == repo_id, CommitParent.commit == current
            )
        ).first()
        if parent is None or parent in chain:
            break
        chain.append(parent)
        current = parent
    return chain
