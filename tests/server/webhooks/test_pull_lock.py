"""The PR refresh lock: on PostgreSQL a second replica's refresh of the same PR waits for the
first (seen waiting in `pg_locks`, no timing), another PR's does not; SQLite takes none."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from cpci.server.core.db import create_db_engine
from cpci.server.webhooks.handling import lock_key, pull_request_lock
from tests.reliability.replicas import wait_for
from tests.server.databases import fresh_database


def _waiting(engine: Engine) -> int:
    with engine.connect() as connection:
        count = connection.execute(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        ).scalar_one()
    return int(count)


def test_a_second_refresh_of_the_same_pull_waits_for_the_first(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = create_db_engine(fresh_database("postgresql", request, tmp_path, migrated=False))
    order: list[str] = []

    def second() -> None:
        with pull_request_lock(engine, "acme/attn", 7):
            order.append("second")

    with pull_request_lock(engine, "acme/attn", 7):
        order.append("first")
        with pull_request_lock(engine, "acme/attn", 8):  # another PR: not held up
            order.append("other pull")
        thread = threading.Thread(target=second)
        thread.start()
        wait_for("the second refresh waiting on the lock", lambda: _waiting(engine) == 1, 60)
        order.append("first done")
    thread.join(60)
    assert order == ["first", "other pull", "first done", "second"]
    assert _waiting(engine) == 0
    engine.dispose()


def test_sqlite_takes_no_lock(tmp_path: Path) -> None:
    """One process serves a SQLite database; its one worker refreshes one PR at a time."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'cpci.db'}")
    with pull_request_lock(engine, "acme/attn", 7), pull_request_lock(engine, "acme/attn", 7):
        pass  # re-entered at once: nothing was held
    engine.dispose()


def test_keys_differ_per_pull_and_fit_a_bigint() -> None:
    keys = {lock_key(repo, n) for repo in ("acme/attn", "acme/moe") for n in (1, 2, 3)}
    assert len(keys) == 6
    assert all(-(2**63) <= k < 2**63 for k in keys)
