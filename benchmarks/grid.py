"""Grid benchmark: how long the grid of thousands of configs x 30 commits takes to answer and to
render, over real HTTP against uvicorn on 127.0.0.1 and in headless Chromium.

    .venv/bin/python benchmarks/grid.py [--configs 5000] [--commits 30] [--repeat 5]

The history is benchmarks/ui.py's (its seed, written straight to the tables: ~1% of configs
flaky, a few always broken) at `--configs` configs in 4 shards per run, `--commits` main runs
plus its pull requests'. Printed, never enforced:

- the server's time for the grid page with every row on it (cold: the matrix is read from the
  results; warm: it is remembered per set of shards), for its default page (500 rows), for a
  filtered one and for the JSON twin;
- Chromium's time from navigation to the `load` event with every row on the page and with
  the default page, and for the page's script to narrow those rows as a reader types a name.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import httpx
from ui import PULLS, REPO, serve, timed
from ui import seed as seed_history

from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade

SHARDS = 4
CHROMIUM = os.environ.get("CPCI_CHROMIUM", "/usr/bin/chromium")


def line(label: str, times: list[float], extra: str = "") -> None:
    print(
        f"{label:<44} p50 {statistics.median(times):8.1f} ms  max {max(times):8.1f} ms"
        + (f"  {extra}" if extra else "")
    )


def in_chromium(base: str, paths: list[str], repeat: int) -> None:
    """Navigation to `load` of each page, then typing a name into its filter box."""
    from playwright.sync_api import sync_playwright

    flags = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=flags)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for path in paths:
            loads, scripts, rows = [], [], 0
            for _ in range(repeat):
                page.goto(base + path, wait_until="load", timeout=120_000)
                loads.append(
                    page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
                )
                rows = page.locator("#grid tbody tr").count()
                scripts.append(page.evaluate(TYPE_A_NAME))
            line(f"Chromium: navigation to load, {rows:,} rows", loads)
            line(f"Chromium: typing a name narrows {rows:,} rows", scripts)
        browser.close()


#: What the page's script takes to hide the rows whose name does not match (ui.js).
TYPE_A_NAME = """(() => {
  const box = document.querySelector('#grid-filter input[name=q]');
  const t0 = performance.now();
  box.value = 'c[4';
  box.dispatchEvent(new Event('input'));
  return performance.now() - t0;
})()"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=5_000)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.db"
        url = f"sqlite:///{path}"
        engine = create_db_engine(url)
        upgrade(engine)
        engine.dispose()
        results = args.configs * (args.commits + PULLS)
        seed_history(path, results, configs=args.configs, shards=SHARDS)
        print(
            f"seeded {results:,} results: {args.configs:,} configs x {args.commits} main "
            f"commits (+{PULLS} PR runs), {SHARDS} shards a run; load {os.getloadavg()[0]:.2f}"
        )
        grid = f"/ui/{REPO}/grid?commits={args.commits}"
        every = f"{grid}&per_page={args.configs}"
        with serve(url) as base, httpx.Client(base_url=base, timeout=300) as http:
            cold = timed(http, every, 1)
            size = len(http.get(every).content)
            line(
                f"grid HTML, all {args.configs:,} rows, cold", cold, "(the matrix read and judged)"
            )
            pages = {
                f"grid HTML, all {args.configs:,} rows, warm": every,
                "grid HTML, default page (500 rows)": grid,
                "grid HTML, filtered (verdict=broken)": f"{grid}&verdict=broken",
                "grid HTML, filtered (q=c[12, param=n=12)": f"{grid}&q=c%5B12&param=n%3D12",
                f"grid JSON twin, all {args.configs:,} rows": f"/api/v1/repos/{REPO}/grid"
                f"?commits={args.commits}&per_page={args.configs}",
            }
            for label, page in pages.items():
                line(label, timed(http, page, args.repeat))
            print(f"{'grid HTML, all rows: bytes':<44} {size / 1e6:8.2f} MB")
            in_chromium(base, [every, grid], args.repeat)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
