"""Reads on a replica (CPCI_DATABASE_READ_URL): GET and HEAD requests read through the read
engine, every other request (uploads, commit ancestry, webhooks) and the webhook worker through
the primary. A read-only PostgreSQL role stands in for the replica: every page and report
answers from it while uploads still land; a read URL naming another database shows that reads
really go there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from cpci import urls
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.builders import BASE, REPO, config, envelope, record, sha, upload
from tests.server.databases import drop_role, fresh_database, migrate_with_token, read_only_role

PULL = 7


@contextmanager
def _served(database_url: str, read_url: str | None) -> Iterator[TestClient]:
    """The app over the migrated `database_url`, reading through `read_url`, with a token."""
    engine = create_db_engine(database_url)
    token = migrate_with_token(engine)
    engine.dispose()
    settings = Settings(database_url=database_url, database_read_url=read_url)
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def _upload_base_and_pull(client: TestClient) -> None:
    upload(client, envelope([record("a"), record("b")]))
    pull = [record("a"), record("b", "failed", message="max err 0.3")]
    upload(
        client,
        envelope(
            pull,
            commit=sha(2),
            branch=None,
            pull_request=PULL,
            base_commit=BASE,
            ci_run_id="200",
        ),
    )


@pytest.fixture
def replica_role(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A PostgreSQL database and a URL of a role that may only read it."""
    url = fresh_database("postgresql", request, tmp_path, migrated=True)
    role = f"reader_{make_url(url).database}"
    yield url, read_only_role(url, role)
    drop_role(url, role)


def test_pages_and_reports_read_from_a_read_only_role_while_uploads_land(
    replica_role: tuple[str, str],
) -> None:
    url, read_url = replica_role
    reader = create_db_engine(read_url)
    with reader.connect() as connection, pytest.raises(DBAPIError, match="read-only"):
        connection.execute(text("DELETE FROM repository"))  # the stand-in refuses writes
    reader.dispose()
    with _served(url, read_url) as client:
        _upload_base_and_pull(client)
        ancestry = {"branch": "main", "parents": [{"commit": sha(3), "parent": BASE}]}
        assert client.post(urls.api_commits(REPO), json=ancestry).status_code == 200
        report = client.get(urls.api_pull_report(REPO, PULL))
        assert report.status_code == 200, report.text
        assert report.json()["counts"]["by_verdict"].get("new_failure") == 1
        for page in (
            urls.api_dashboard(REPO),
            urls.api_pull_page(REPO, PULL),
            urls.api_run_summary(REPO, "200"),
            urls.api_run_detail(REPO, "200"),
            urls.api_config(REPO, config("b")),
            urls.api_flaky(REPO),
            urls.api_durations(REPO),
            urls.dashboard(REPO),
            urls.pull(REPO, PULL),
            urls.run(REPO, "200"),
            urls.config(REPO, config("b")),
        ):
            assert client.get(page).status_code == 200, page


def test_reads_go_to_the_read_url_and_writes_to_the_primary(tmp_path: Path) -> None:
    """The read URL names another (migrated, empty) database: what was uploaded to the primary
    is not found through GET, which proves where GETs read; without a read URL it is."""
    (tmp_path / "replica").mkdir()
    replica = f"sqlite:///{tmp_path / 'replica' / 'cpci.db'}"
    engine = create_db_engine(replica)
    migrate_with_token(engine)
    engine.dispose()
    primary = f"sqlite:///{tmp_path / 'cpci.db'}"
    with _served(primary, replica) as client:
        _upload_base_and_pull(client)
        assert client.get(urls.api_pull_report(REPO, PULL)).status_code == 404
    with _served(primary, None) as client:
        assert client.get(urls.api_pull_report(REPO, PULL)).status_code == 200
