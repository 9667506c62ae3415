"""The webhook queue on both engines: replicas claim deliveries side by side (PostgreSQL:
`FOR UPDATE SKIP LOCKED`; SQLite: one writer at a time), never the same one twice."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlmodel import Session

from cpci.server.core.db import create_db_engine, writer
from cpci.server.crud import github as queue
from cpci.server.models import utcnow
from tests.server.databases import ENGINES, fresh_database


@pytest.mark.parametrize("kind", ENGINES)
def test_two_workers_never_claim_the_same_delivery(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Replicas share the queue: claims race from two threads, each row goes to exactly one."""
    shared = create_db_engine(fresh_database(kind, request, tmp_path, migrated=True))
    now = utcnow()
    with Session(shared) as session:
        for i in range(40):
            queue.record_webhook_delivery(
                session=session,
                delivery_id=f"d-{i}",
                event="pull_request",
                action="opened",
                status="queued",
                digest=f"{i}",
                payload={},
                now=now,
            )
    claimed: list[list[str]] = [[], []]
    start = threading.Barrier(2)

    def claim_all(mine: list[str]) -> None:
        start.wait()
        while True:
            with Session(writer(shared)) as session:
                got = queue.claim_webhook_delivery(session=session, now=now, lease_s=300)
            if got is None:
                return
            mine.append(got.delivery_id)

    threads = [threading.Thread(target=claim_all, args=(m,)) for m in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = claimed[0] + claimed[1]
    assert sorted(everything) == sorted(f"d-{i}" for i in range(40))  # none twice, none lost
    shared.dispose()


@pytest.mark.parametrize("kind", ENGINES)
def test_one_guid_stored_by_another_replica_meanwhile_is_a_duplicate_not_a_replay(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub's retry of one delivery reaches two replicas at once: the second looks the GUID
    up before the first commits, then finds its body stored. It is that delivery again (the
    same GUID), not a replay of its body under another."""
    engine = create_db_engine(fresh_database(kind, request, tmp_path, migrated=True))
    now = utcnow()

    def record(delivery_id: str) -> str:
        with Session(engine) as session:
            return queue.record_webhook_delivery(
                session=session,
                delivery_id=delivery_id,
                event="pull_request",
                action="opened",
                status="queued",
                digest="body",
                payload={},
                now=now,
            )

    try:
        assert record("d-1") == "new"
        monkeypatch.setattr(queue, "_webhook_delivery", lambda session, delivery_id: None)
        assert record("d-1") == "duplicate"  # its GUID lookup ran before the other commit
        assert record("d-2") == "replay"  # the same body under another GUID
    finally:
        engine.dispose()
