"""The app's process-level setup."""

from __future__ import annotations

import gc

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from cpci.server.app import GC_YOUNG_THRESHOLD
from tests.live_server import serve


def test_serving_keeps_the_startup_heap_and_young_uploads_out_of_full_collections(
    engine: Engine, db_url: str
) -> None:
    """The start-up heap is frozen and young passes wait for GC_YOUNG_THRESHOLD allocations
    while serving; shutdown gives the process its thresholds back."""
    gc.unfreeze()
    before = gc.get_threshold()
    try:
        with TestClient(create_app(Settings(database_url=db_url), engine=engine)) as client:
            assert gc.get_freeze_count() > 0
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
            assert client.get("/healthz").status_code == 200
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()  # the test process keeps collecting as before


def test_metric_labels_stay_bounded_whatever_clients_send(engine: Engine, db_url: str) -> None:
    """15 junk methods and 30 junk paths over real HTTP add a handful of series, not hundreds."""
    app = create_app(Settings(database_url=db_url), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url) as client:
        for i in range(15):
            client.request(f"JUNK{i}", "/healthz")
            client.get(f"/no/such/page-{i}")
            client.get(f"/api/v1/repos/acme/attn/runs/run-{i}")
        text = client.get("/metrics").text
    series = [line for line in text.splitlines() if line.startswith("cpci_http_requests_total{")]
    methods = {line.split('method="')[1].split('"')[0] for line in series}
    routes = {line.split('route="')[1].split('"')[0] for line in series}
    assert methods <= {"GET", "other"}
    assert "other" in methods
    assert not any("run-" in r or "page-" in r for r in routes)
    assert len(series) <= 8, series


def test_metrics_need_a_token_where_reads_do(engine: Engine, db_url: str, token: str) -> None:
    """Its counts span every repository: any of the service's tokens reads them, none does not."""
    public = create_app(Settings(database_url=db_url), engine=engine)
    with serve(public) as url:
        assert httpx.get(f"{url}/metrics").status_code == 200
    guarded = create_app(Settings(database_url=db_url, read_access="token"), engine=engine)
    with serve(guarded) as url:
        refused = httpx.get(f"{url}/metrics")
        assert refused.status_code == 401
        assert "CPCI_READ_ACCESS=token" in refused.json()["detail"]
        forged = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer cpci_" + "A" * 43})
        assert forged.status_code == 401
        read = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
        assert read.status_code == 200
        assert "cpci_http_requests_total" in read.text
