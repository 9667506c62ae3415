"""Screenshots of the web UI for the README, taken from a running service (e.g. after `cpci demo`).

    python scripts/ui-screenshots.py http://127.0.0.1:8765 demo/cp-attention 1 docs/img

Uses Playwright with Debian's Chromium (`/usr/bin/chromium`), never a downloaded browser.
"""

from __future__ import annotations

import sys
from pathlib import Path

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


def main(base: str, repository: str, pull: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pages = {"dashboard": urls.dashboard(repository), "pull-request": urls.pull(repository, pull)}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, path in pages.items():
            page.goto(base.rstrip("/") + path)
            page.screenshot(path=str(out / f"ui-{name}.png"), full_page=False)
            print(out / f"ui-{name}.png")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
