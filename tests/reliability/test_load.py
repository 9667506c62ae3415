"""The service under load and killed mid-upload, over real HTTP to `cpci serve`, on both engines.

CI size: 4 concurrent uploaders x 3 shards (every 5th shard sent twice), then a SIGKILL with half
an upload's body unsent and one while a whole body is being stored. Nothing may be lost, doubled
or visible half-stored. `benchmarks/reliability_load.py` runs 32 x 20 and prints latencies.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.service import (
    Served,
    check_load,
    count_stored,
    kill_mid_upload,
    load,
    prepare_database,
)
from tests.server.databases import ENGINES, fresh_database


@pytest.fixture(scope="module", params=ENGINES)
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, str]]:
    """A `cpci serve` process over a fresh database of each engine, and an upload token."""
    directory = tmp_path_factory.mktemp(request.param)
    url = fresh_database(request.param, request, directory, migrated=False)
    token = prepare_database(url)
    served = Served(url, directory / "serve.log")
    served.start()
    yield served, token
    served.stop()


def test_concurrent_uploaders_lose_and_double_nothing(
    service: tuple[Served, str], tmp_path: Path
) -> None:
    served, token = service
    report = load(served.url, token, tmp_path, uploaders=4, shards=3, results=25)
    stored = count_stored(served.database_url)
    assert check_load(report, stored) == []
    assert stored.runs == 4
    statuses = [r.status for r in report.receipts]
    assert statuses.count("duplicate") == len(statuses) - 12 > 0  # the resends stored nothing
    final = [r for r in report.receipts if r.shards.reported == 3]
    assert len({r.ci_run_id for r in final}) == 4, "each run ends with all shards reported"
    assert 0 < report.percentile(95) < 60


@pytest.mark.parametrize(("fraction", "delay_s"), [(0.5, 0.0), (1.0, 0.3)])
def test_service_killed_mid_upload_shows_no_partial_shard_and_the_retry_completes(
    service: tuple[Served, str], tmp_path: Path, fraction: float, delay_s: float
) -> None:
    served, token = service
    run = f"kill-{fraction}"
    starts = served.starts
    report = kill_mid_upload(
        served,
        token,
        tmp_path / "spool",
        run=run,
        results=4000,
        fraction=fraction,
        store_delay_s=delay_s,
    )
    assert report.problems == []
    assert served.starts == starts + 1, "the service was killed and started again"
    assert report.partial_after_kill == []
    if fraction < 1:
        assert not report.committed_before_kill, "half a body must never be stored"
        assert report.statuses == ["stored"]
