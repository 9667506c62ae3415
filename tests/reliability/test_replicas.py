"""Two `cpci serve` replicas on one PostgreSQL behind a round-robin proxy, at CI size.

16 shards of one PR run at once across both (resends, one shard twice at the same moment), a
replica SIGKILLed while an upload is open to it and started again, webhook deliveries (each GUID
twice) worked off by both replicas' workers, reads through a read-only role: every result stored
once, one PR comment and one check run on the fake GitHub, the same PR report from either
replica (`tests/reliability/replicas.py`). `benchmarks/replicas.py` runs it larger and prints
results/s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.github.contract import require_reference
from tests.reliability.replicas import run_replicas
from tests.server.databases import fresh_database


def test_two_replicas_store_every_result_once_and_publish_once(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    require_reference()
    url = fresh_database("postgresql", request, tmp_path, migrated=False)
    run = run_replicas(url, tmp_path, results=40, deliveries=6)
    assert run.problems == [], "\n".join(run.problems)
    assert run.cut_on_kill >= 1, "replica 0 was killed with an upload open to it"
    assert min(run.connections) > 0, "the proxy sent connections to both replicas"
    assert all(run.writes_by_replica), "both replicas' workers published"
