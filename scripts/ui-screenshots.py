"""Screenshots of the web UI for the README, taken from a running service (e.g. after `cpci demo`).

    python scripts/ui-screenshots.py http://127.0.0.1:8765 demo/cp-attention 1 docs/img

Writes ui-dashboard, ui-pull-request, ui-grid and ui-config (the grid's first flaky config, else
its first row) at a desktop's width (1280 px), and ui-pull-request-phone at a phone's (390 px).
Uses Playwright with Debian's Chromium (`/usr/bin/chromium`), never a downloaded browser.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from cpci import urls

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


def _config(base: str, repository: str) -> str:
    """The config page worth showing: the grid's first flaky row, else its first."""
    rows = httpx.get(base + urls.api_grid(repository), timeout=60).json()["rows"]
    if not rows:
        sys.exit(f"the grid of {repository} is empty: upload some results first (`cpci demo`)")
    chosen = next((r for r in rows if r["flaky"]), rows[0])
    return urls.config(repository, chosen["config"])


def main(base: str, repository: str, pull: int, out: Path) -> None:
    base = base.rstrip("/")
    out.mkdir(parents=True, exist_ok=True)
    shots = {
        "dashboard": (urls.dashboard(repository), DESKTOP),
        "pull-request": (urls.pull(repository, pull), DESKTOP),
        "grid": (urls.grid(repository), DESKTOP),
        "config": (_config(base, repository), DESKTOP),
        "pull-request-phone": (urls.pull(repository, pull), PHONE),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for name, (path, viewport) in shots.items():
            page = browser.new_page(viewport=viewport)
            page.goto(base + path)
            page.screenshot(path=str(out / f"ui-{name}.png"), full_page=False)
            page.close()
            print(out / f"ui-{name}.png")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
