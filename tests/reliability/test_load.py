"""The service under load and killed mid-upload, over real HTTP to `cpci serve`, on both engines.

CI size: 4 concurrent uploaders x 3 shards (every 5th shard sent twice), then a SIGKILL with half
an upload's body unsent and one while a whole body is being stored (the service paused, by
`tests/reliability/paused_serve.py`, with the shard's rows written and not committed). Nothing
may be lost, doubled or visible half-stored. Each test has its own database and service, so
the counts are its own in any order. `benchmarks/reliability_load.py` runs 32 x 20 and prints
latencies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.service import (
    SERVE,
    Served,
    StorePause,
    check_load,
    count_stored,
    kill_mid_upload,
    load,
    prepare_database,
    served,
)
from tests.server.databases import ENGINES, fresh_database


@pytest.fixture(params=ENGINES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A fresh, migrated database of each engine for this test alone, and an upload token."""
    url = fresh_database(request.param, request, tmp_path, migrated=False)
    return url, prepare_database(url)


def test_concurrent_uploaders_lose_and_double_nothing(
    database: tuple[str, str], tmp_path: Path
) -> None:
    url, token = database
    with served(url, tmp_path / "serve.log") as service:
        report = load(service.url, token, tmp_path, uploaders=4, shards=3, results=25)
    stored = count_stored(url)
    assert check_load(report, stored) == []
    assert stored.runs == 4
    statuses = [r.status for r in report.receipts]
    assert statuses.count("duplicate") == len(statuses) - 12 > 0  # the resends stored nothing
    final = [r for r in report.receipts if r.shards.reported == 3]
    assert len({r.ci_run_id for r in final}) == 4, "each run ends with all shards reported"
    assert 0 < report.percentile(95) < 60


@pytest.mark.parametrize("phase", ["receiving", "storing"])
def test_service_killed_mid_upload_shows_no_partial_shard_and_the_retry_completes(
    database: tuple[str, str], tmp_path: Path, phase: str
) -> None:
    url, token = database
    pause = StorePause(tmp_path) if phase == "storing" else None
    service = Served(url, tmp_path / "serve.log", argv=pause.argv if pause else SERVE)
    service.start()
    try:
        report = kill_mid_upload(
            service,
            token,
            tmp_path / "spool",
            run=f"kill-{phase}",
            results=4000,
            fraction=0.5 if phase == "receiving" else 1.0,
            pause=pause,
        )
    finally:
        service.stop()
    assert report.problems == []
    assert report.phase == phase
    assert service.starts == 2, "the service was killed and started again"
    assert report.partial_after_kill == []
    # Killed with half a body unsent, or with the whole shard written and not committed: in
    # neither case was anything stored, so the retry stores it (not a duplicate).
    assert report.paused_mid_store == (phase == "storing")
    assert not report.committed_before_kill
    assert report.statuses == ["stored"]
