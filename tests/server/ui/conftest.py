"""A real service for the browser tests: uvicorn on 127.0.0.1 over a seeded SQLite database,
and Debian's Chromium driven headless by Playwright (no browser download).

Without Chromium or Playwright the browser tests skip with the reason, except under CI (`CI`
set), where they must run. Screenshots go to `CPCI_ARTIFACTS` (default `artifacts/ui/`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cpci import urls
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.builders import REPO, send
from tests.live_server import serve
from tests.server.databases import migrate_with_token
from tests.server.ui.ui_seed import seed

CHROMIUM = os.environ.get("CPCI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
]
ROOT = Path(__file__).resolve().parents[3]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = Path(os.environ.get("CPCI_ARTIFACTS") or ROOT / "artifacts" / "ui")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The base URL of a seeded service, served by uvicorn over real HTTP; a test module's
    `EXTRA_UPLOADS` (upload bodies) are uploaded after the seed, then its `QUARANTINES`
    ((config, reason) pairs) quarantined."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ui') / 'cpci.db'}"
    engine = create_db_engine(url)
    token = migrate_with_token(engine, name="ui")
    app = create_app(Settings(database_url=url), engine=engine)
    try:
        with serve(app) as base:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                assert http.get("/healthz").status_code == 200
                seed(http)
                for body in getattr(request.module, "EXTRA_UPLOADS", ()):
                    response = send(http, body)
                    assert response.status_code == 201, response.text
                for key, reason in getattr(request.module, "QUARANTINES", ()):
                    body = {"config": key, "reason": reason}
                    response = http.post(urls.api_quarantines(REPO), json=body)
                    assert response.status_code == 201, response.text
            yield base
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CPCI_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def dialogs() -> list[str]:
    """Messages of dialogs the page opened: an `alert` would mean injected script ran."""
    return []


@pytest.fixture
def page(browser: Any, dialogs: list[str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", dismiss)
    tab.set_default_timeout(10_000)
    yield tab
    context.close()
