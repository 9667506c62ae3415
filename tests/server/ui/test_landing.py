"""`/`, the service's front door, over real HTTP: recent repositories linking to their
dashboards; with token reads, a page saying a token is needed and no repository's name."""

from __future__ import annotations

from html.parser import HTMLParser

import httpx
from sqlalchemy import Engine
from sqlmodel import Session

from cpci.server import Settings, create_app
from cpci.server.crud.tokens import create_token
from tests.builders import envelope, record, send
from tests.live_server import serve


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


def hrefs(html: str) -> list[str]:
    parser = Links()
    parser.feed(html)
    return parser.hrefs


def seed(client: httpx.Client, engine: Engine) -> None:
    for repository, runs in (("acme/old", 1), ("acme/new", 2)):
        with Session(engine) as session:
            token = create_token(session=session, repository=repository).token
            session.commit()
        for i in range(runs):
            body = envelope([record("p2p")], repository=repository, ci_run_id=f"{i}")
            response = send(client, body, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 201, response.text


def test_the_root_lists_recent_repositories_with_links(engine: Engine, db_url: str) -> None:
    app = create_app(Settings(database_url=db_url), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url) as client:
        empty = client.get("/")
        assert empty.status_code == 200
        assert empty.headers["content-type"].startswith("text/html")
        assert "No results uploaded yet" in empty.text
        seed(client, engine)
        page = client.get("/")
        assert page.status_code == 200
        links = hrefs(page.text)
        dashboards = [h for h in links if h.startswith("/ui/acme/")]
        assert dashboards == ["/ui/acme/new", "/ui/acme/old"]  # the most recent first
        for href in dashboards:
            assert client.get(href).status_code == 200


def test_with_token_reads_the_root_says_a_token_is_needed(engine: Engine, db_url: str) -> None:
    app = create_app(Settings(database_url=db_url, read_access="token"), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url) as client:
        seed(client, engine)
        page = client.get("/")
    assert page.status_code == 200
    assert "needs a token" in page.text
    assert "CPCI_READ_ACCESS=token" in page.text
    assert "acme/" not in page.text
