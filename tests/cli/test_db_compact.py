"""`cpci db compact`: rolls up the runs older than --older-than (or CPCI_RAW_RETENTION_DAYS)
with a progress line per batch, changes nothing when run again or with --dry-run, and says
what to pass when no age is given."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, text
from sqlmodel import Session, select

from cpci.cli import main
from cpci.server.app import create_app
from cpci.server.core.config import Settings
from cpci.server.core.db import create_db_engine
from cpci.server.crud.tokens import create_token
from cpci.server.models import Result, utcnow
from cpci.server.rollup import ResultRollup
from tests.builders import REPO, envelope, record, sha, upload
from tests.server.databases import ENGINES, fresh_database

RUNS = 4


@pytest.fixture(params=ENGINES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of each engine with RUNS runs of main, the first three 20 days old."""
    url = fresh_database(request.param, request, tmp_path, migrated=False)
    assert main(["db", "upgrade", "--database-url", url]) == 0
    engine = create_db_engine(url)
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO, name="tests").token
        session.commit()
    with TestClient(create_app(Settings(database_url=url), engine=engine)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        for run in range(RUNS):
            results = [record("a"), record("b", "failed", message="boom")]
            upload(client, envelope(results, ci_run_id=str(run), commit=sha(run)))
    with Session(engine) as session:
        session.execute(
            text("UPDATE run SET created_at = :at WHERE ci_run_id IN ('0', '1', '2')"),
            {"at": utcnow() - timedelta(days=20)},
        )
        session.commit()
    engine.dispose()
    return url


def _counts(url: str) -> tuple[int, int]:
    engine = create_db_engine(url)
    with Session(engine) as session:
        results = session.exec(select(func.count()).select_from(Result)).one()
        rollups = session.exec(select(func.count()).select_from(ResultRollup)).one()
    engine.dispose()
    return results, rollups


def test_compact_rolls_up_old_runs_in_batches_and_again_changes_nothing(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dry = ["db", "compact", "--older-than", "7", "--dry-run", "--database-url", database]
    assert main(dry) == 0
    assert capsys.readouterr().out.startswith("would roll up 6 results of 3 runs before ")
    assert _counts(database) == (2 * RUNS, 0)

    args = ["db", "compact", "--older-than", "7", "--batch", "2", "--database-url", database]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert out.startswith("rolled up 6 results of 3 runs before ")
    assert "in 3 batch(es), 6 daily rows written" in out  # a run (2 results) a batch
    assert [line.split(" before ")[0] for line in err.splitlines()] == [
        "rolled up 2 results of 1 runs",
        "rolled up 4 results of 2 runs",
        "rolled up 6 results of 3 runs",
    ]
    assert _counts(database) == (2, 2)  # the new run's results stay raw; a row a config

    assert main(args) == 0
    assert capsys.readouterr().out.startswith("rolled up 0 results of 0 runs")
    assert _counts(database) == (2, 2)


def test_compact_takes_the_retention_setting_or_says_what_to_pass(
    database: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["db", "compact", "--database-url", database]) == 2
    assert "--older-than DAYS (> 0), or set CPCI_RAW_RETENTION_DAYS" in capsys.readouterr().err
    monkeypatch.setenv("CPCI_RAW_RETENTION_DAYS", "30")
    assert main(["db", "compact", "--database-url", database]) == 0
    assert capsys.readouterr().out.startswith("rolled up 0 results of 0 runs")  # 20 < 30 days
    assert _counts(database) == (2 * RUNS, 0)
