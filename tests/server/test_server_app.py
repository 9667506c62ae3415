"""The app's process-level setup."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from cpci.server import Settings, create_app


def test_startup_keeps_the_startup_heap_out_of_full_collections(
    engine: Engine, db_url: str
) -> None:
    gc.unfreeze()
    try:
        with TestClient(create_app(Settings(database_url=db_url), engine=engine)) as client:
            assert gc.get_freeze_count() > 0
            assert client.get("/healthz").status_code == 200
    finally:
        gc.unfreeze()  # the test process keeps collecting as before
