"""Links to GitHub built from uploaded ids: a `ci_run_id` of `../` (or only dots) must never lead
out of the repository's `/actions/runs/`, however a browser resolves the URL."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from cpci.urls import Links
from tests.builders import REPO, envelope, record, send
from tests.live_server import serve

HOSTILE_RUN_IDS = ["../../settings", "..", ".", "...", "a/../../b", "%2e%2e", "x?y#z", "run 1"]


def resolved_path(url: str) -> str:
    """The path a browser opens for `url` (dot segments resolved, as WHATWG URLs do)."""
    parts: list[str] = []
    for part in urlsplit(url).path.split("/"):
        if part.lower() in ("..", ".%2e", "%2e.", "%2e%2e"):
            if parts:
                parts.pop()
        elif part.lower() not in (".", "%2e"):
            parts.append(part)
    return "/".join(parts)


@pytest.mark.parametrize("run_id", HOSTILE_RUN_IDS)
def test_a_run_link_stays_under_the_repositorys_actions(run_id: str) -> None:
    url = Links("https://github.com").run(REPO, run_id, 2)
    assert url.startswith("https://github.com/")
    assert resolved_path(url).startswith(f"/{REPO}/actions")
    assert "?" not in url
    assert "#" not in url


def test_run_links_the_api_hands_out_are_quoted(engine: Engine, db_url: str, token: str) -> None:
    """A hostile run id is no GitHub run id (those are numbers): the dashboard links no GitHub
    page for it, and its run's link is its page on this service, the id one quoted segment."""
    app = create_app(Settings(database_url=db_url), engine=engine)
    headers = {"Authorization": f"Bearer {token}"}
    with serve(app) as url, httpx.Client(base_url=url, headers=headers) as client:
        for run_id in ("../../settings", "a/.."):
            body = envelope([record("p2p")], ci_run_id=run_id)
            assert send(client, body).status_code == 201
        dashboard = client.get(f"/api/v1/repos/{REPO}/dashboard")
        assert dashboard.status_code == 200, dashboard.text
    assert _github_urls(dashboard.json()) == []
    links = sorted(row["run"]["url"] for row in dashboard.json()["runs"])
    assert links == [f"/ui/{REPO}/runs/..%2F..%2Fsettings", f"/ui/{REPO}/runs/a%2F.."]
    for link in links:
        assert resolved_path(link).startswith(f"/ui/{REPO}"), link


def _github_urls(data: object) -> list[str]:
    if isinstance(data, dict):
        return [u for value in data.values() for u in _github_urls(value)]
    if isinstance(data, list):
        return [u for item in data for u in _github_urls(item)]
    return [data] if isinstance(data, str) and data.startswith("https://github.com/") else []
