"""First-parent commit links: where a PR's base has no results, the nearest tested ancestor
is used instead, and the report says how many commits behind it is."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from cpci.server.core.errors import Conflict
from cpci.server.crud.common import chunks, insert_missing
from cpci.server.models import CommitParent


def record_parents(*, session: Session, repo_id: int, links: Sequence[tuple[str, str]]) -> int:
    """Store (commit, first parent) pairs; known commits keep their first-recorded parent.

    A link that contradicts a stored one (same commit, another parent) is refused with both
    parents named, and nothing is stored: git history does not change, so one of the two
    uploaders is wrong (a rewritten branch, or someone claiming a history that is not there).
    """
    wanted = dict(links)
    for c, p in links:
        if wanted[c] != p:
            raise Conflict(f"commit {c} is sent with two first parents: {wanted[c]} and {p}")
    stored = _stored_parents(session, repo_id, list(wanted))
    clashes = [(c, stored[c], p) for c, p in wanted.items() if c in stored and stored[c] != p]
    if clashes:
        c, old, new = clashes[0]
        raise Conflict(
            f"commit {c} already has first parent {old}, not {new}"
            f"{f' (and {len(clashes) - 1} more such link(s))' if len(clashes) > 1 else ''}: "
            "ancestry is first-write-wins and is never rewritten; was the branch force-pushed? "
            "nothing from this request was recorded"
        )
    rows = [{"repository_id": repo_id, "commit": c, "parent": p} for c, p in wanted.items()]
    insert_missing(
        session=session,
        model=CommitParent,
        rows=rows,
        keys=["repository_id", "commit"],
    )
    return len(rows)


def _stored_parents(session: Session, repo_id: int, commits: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for chunk in chunks(commits):
        found.update(
            session.exec(
                select(CommitParent.commit, CommitParent.parent).where(
                    CommitParent.repository_id == repo_id, col(CommitParent.commit).in_(chunk)
                )
            ).all()
        )
    return found


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
