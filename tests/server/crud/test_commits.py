"""First-parent chains read in one recursive query, on both engines: the walk's depth, several
starts at once, a start with no parent, other repositories' links and a cycle of links (the
culprit's chain through the service: tests/server/api/test_culprit.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from cpci.server.crud.commits import ancestor_chains, ancestors, record_parents
from cpci.server.crud.repos import ensure_repository
from tests.builders import sha

CHAIN = 30


@pytest.fixture
def linked(engine: Engine) -> tuple[int, int]:
    """REPO's chain sha(1) -> sha(0) ... and another repository's links over the same shas
    pointing elsewhere (links are per repository)."""
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/attn")
        other = ensure_repository(session=session, name="acme/other")
        record_parents(
            session=session,
            repo_id=repo,
            links=[(sha(k), sha(k - 1)) for k in range(1, CHAIN)],
        )
        record_parents(session=session, repo_id=other, links=[(sha(5), sha(99))])
        session.commit()
    return repo, other


def test_each_start_gets_its_nearest_first_chain_up_to_depth(
    engine: Engine, linked: tuple[int, int]
) -> None:
    repo, other = linked
    with Session(engine) as session:
        found = ancestor_chains(
            session=session, repo_id=repo, commits=[sha(29), sha(5), sha(0), sha(77)], depth=10
        )
        assert found[sha(29)] == [sha(k) for k in range(28, 18, -1)]
        assert found[sha(5)] == [sha(4), sha(3), sha(2), sha(1), sha(0)]
        assert found[sha(0)] == []
        assert found[sha(77)] == []
        assert ancestors(session=session, repo_id=other, commit=sha(5), depth=10) == [sha(99)]
        assert ancestors(session=session, repo_id=repo, commit=sha(3), depth=0) == []


def test_a_cycle_of_links_ends_before_it_repeats(engine: Engine) -> None:
    with Session(engine) as session:
        repo = ensure_repository(session=session, name="acme/loop")
        links = [(sha(1), sha(2)), (sha(2), sha(3)), (sha(3), sha(1))]
        record_parents(session=session, repo_id=repo, links=links)
        found = ancestor_chains(session=session, repo_id=repo, commits=[sha(1)], depth=50)
    assert found[sha(1)] == [sha(2), sha(3)]
