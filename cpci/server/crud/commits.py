"""First-parent commit links: where a PR's base has no results, the nearest tested ancestor
is used instead, and the report says how many commits behind it is."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, delete, select

from cpci.server.core.errors import Conflict
from cpci.server.crud.common import chunks, fetch_rows, insert_missing
from cpci.server.models import CommitParent


def record_parents(*, session: Session, repo_id: int, links: Sequence[tuple[str, str]]) -> int:
    """Store (commit, first parent) pairs sent for a trusted branch; known commits keep their
    first-recorded trusted parent.

    A link that contradicts a stored trusted one (same commit, another parent) is refused with
    both parents named, and nothing is stored: git history does not change, so one of the two
    uploaders is wrong (a rewritten branch, or someone claiming a history that is not there).
    A stored link not known to come from a trusted branch (recorded before trust was checked)
    is replaced: a feature branch may have claimed it first.
    """
    wanted = dict(links)
    for c, p in links:
        if wanted[c] != p:
            raise Conflict(f"commit {c} is sent with two first parents: {wanted[c]} and {p}")
    stored = _stored_parents(session, repo_id, list(wanted))
    clashes = [
        (c, parent, p)
        for c, p in wanted.items()
        if c in stored and (parent := stored[c])[0] != p and parent[1]
    ]
    if clashes:
        c, (old, _), new = clashes[0]
        raise Conflict(
            f"commit {c} already has first parent {old}, not {new}"
            f"{f' (and {len(clashes) - 1} more such link(s))' if len(clashes) > 1 else ''}: "
            "ancestry is first-write-wins and is never rewritten; was the branch force-pushed? "
            "nothing from this request was recorded"
        )
    replaced = [c for c, p in wanted.items() if c in stored and stored[c] != (p, True)]
    for chunk in chunks(replaced):
        session.execute(
            delete(CommitParent).where(
                col(CommitParent.repository_id) == repo_id, col(CommitParent.commit).in_(chunk)
            )
        )
    rows = [
        {"repository_id": repo_id, "commit": c, "parent": p, "trusted": True}
        for c, p in wanted.items()
    ]
    insert_missing(
        session=session,
        model=CommitParent,
        rows=rows,
        keys=["repository_id", "commit"],
    )
    return len(rows)


def _stored_parents(
    session: Session, repo_id: int, commits: list[str]
) -> dict[str, tuple[str, bool]]:
    """Each stored commit's (first parent, whether a trusted branch sent it)."""
    found: dict[str, tuple[str, bool]] = {}
    for chunk in chunks(commits):
        for commit, parent, trusted in session.exec(
            select(CommitParent.commit, CommitParent.parent, CommitParent.trusted).where(
                CommitParent.repository_id == repo_id, col(CommitParent.commit).in_(chunk)
            )
        ).all():
            found[commit] = (parent, trusted)
    return found


#: Each start's first-parent ancestors, nearest first, walked in the database: one recursive
#: query for every start and every step (`n`, the distance from the start, bounds the walk, so a
#: cycle of links ends at `depth` like any chain; `ancestor_chains` cuts it at the first repeat).
_ANCESTORS = """
WITH RECURSIVE walk(start, n, c) AS (
    SELECT "commit", 1, parent FROM commit_parent
    WHERE repository_id = ? AND "commit" IN ({starts})
  UNION ALL
    SELECT walk.start, walk.n + 1, p.parent FROM walk
    JOIN commit_parent p ON p.repository_id = ? AND p."commit" = walk.c
    WHERE walk.n < ?
)
SELECT start, c FROM walk ORDER BY start, n
"""


def ancestor_chains(
    *, session: Session, repo_id: int, commits: Sequence[str], depth: int
) -> dict[str, list[str]]:
    """Up to `depth` first-parent ancestors of each of `commits`, nearest first, in one query
    (a commit with no recorded parent maps to an empty list)."""
    starts = list(dict.fromkeys(commits))
    chains: dict[str, list[str]] = {c: [] for c in starts}
    if not starts or depth < 1:
        return chains
    sql = _ANCESTORS.format(starts=", ".join("?" * len(starts)))
    cut: set[str] = set()
    for start, parent in fetch_rows(session, sql, repo_id, *starts, repo_id, depth):
        chain = chains[start]
        if start in cut or parent in chain or parent == start:
            cut.add(start)  # a cycle of links: the chain ends before it repeats
            continue
        chain.append(parent)
    return chains


def ancestors(*, session: Session, repo_id: int, commit: str, depth: int) -> list[str]:
    """Up to `depth` first-parent ancestors of `commit`, nearest first."""
    return ancestor_chains(session=session, repo_id=repo_id, commits=[commit], depth=depth)[commit]
