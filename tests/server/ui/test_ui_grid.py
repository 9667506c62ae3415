"""The grid in a real browser: opened from the dashboard, a row per config and a coloured cell per
main commit, flaky and quarantined rows marked, rows narrowed by typing (on the page) and by the
filter form (on the server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from cpci import urls
from tests.server.ui.test_ui_browser import shot
from tests.server.ui.ui_seed import A2A, MAIN_RUNS, NAMES, REPO, RING, XSS_CONFIG, ring_shard

REASON = "ring hangs on gpu-b: tracked in #31"
QUARANTINES = [(RING, REASON)]
#: The colours ui.css gives a failed cell and a passed one (--fail, --pass).
RED, GREEN = "rgb(198, 40, 40)", "rgb(46, 125, 50)"


def twin(service: str) -> dict[str, Any]:
    answer = httpx.get(service + urls.api_grid(REPO), timeout=30)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def test_the_grid_colours_each_commit_and_marks_flaky_and_quarantined_rows(
    page: Any, service: str, artifacts: Path
) -> None:
    page.goto(service + urls.dashboard(REPO))
    page.locator("#grid-link").click()
    page.wait_for_url("**/grid**")
    data = twin(service)
    rows = page.locator("#grid tbody tr")
    assert rows.count() == len(NAMES) == len(data["rows"])
    assert page.locator("#grid thead th.commit").count() == MAIN_RUNS == len(data["columns"])
    # Row by row, cell by cell, the page shows what its twin says, in the twin's colours.
    for i, row in enumerate(data["rows"]):
        cells = rows.nth(i).locator("td.c")
        assert cells.evaluate_all("cs => cs.map(c => c.className)") == [
            f"c {s or 'none'}" for s in row["cells"]
        ]
    a2a = page.locator("#grid tbody tr", has=page.locator(f'a[href="{urls.config(REPO, A2A)}"]'))
    fail_colour = a2a.locator("td.c.fail").first.evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    pass_colour = a2a.locator("td.c.pass").first.evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    assert (fail_colour, pass_colour) == (RED, GREEN)
    # a2a fails every third run: its history labels it flaky, and the row says so.
    flaky = {r["config"] for r in data["rows"] if r["flaky"]}
    assert A2A in flaky
    assert page.locator("#grid tbody tr[data-flaky]").count() == len(flaky)
    assert "flaky" in a2a.locator("td.row-verdict").inner_text()
    # ring is quarantined: marked, with the reason as its tooltip.
    mark = page.locator("#grid tbody tr[data-quarantined] .badge.quarantined")
    assert mark.count() == 1
    assert mark.get_attribute("title") == REASON
    shot(page, artifacts, "6-grid")


def test_typing_narrows_the_rows_at_once_and_the_form_filters_on_the_server(
    page: Any, service: str
) -> None:
    page.goto(service + urls.grid(REPO))
    page.locator("#grid-filter input[name=q]").fill("ring")  # the page's script, no request
    visible = page.locator("#grid tbody tr:visible")
    assert visible.count() == 1
    assert "[ring]" in visible.inner_text()
    page.locator("#grid-filter input[name=q]").fill("")
    assert page.locator("#grid tbody tr:visible").count() == len(NAMES)

    page.locator("#grid-filter input[name=verdict][value=quarantined]").check()
    page.locator("#grid-filter button[type=submit]").click()
    page.wait_for_url("**verdict=quarantined**")
    assert page.locator("#grid tbody tr").count() == 1
    assert page.locator("#grid-range").inner_text().startswith(f"1 of {len(NAMES)} configs")
    # The counts link to their verdict's rows: ring failed on gpu-b at the run before the newest
    # and passed on gpu-a at the newest, so it is fixed.
    assert (ring_shard(MAIN_RUNS - 1), ring_shard(MAIN_RUNS)) == (1, 0)
    page.locator("#grid-verdicts a[data-verdict=fixed]").click()
    page.wait_for_url("**verdict=fixed**")
    assert page.locator("#grid tbody tr").evaluate_all("rs => rs.map(r => r.dataset.verdict)") == [
        "fixed"
    ]
    assert "[ring]" in page.locator("#grid tbody").inner_text()
    # A name matching nothing says so; the XSS-named config's row is text, not markup.
    page.goto(service + urls.grid(REPO) + "?q=nothing-is-called-this")
    assert page.locator("#grid").count() == 0
    assert "No config matches." in page.locator("main").inner_text()
    page.goto(service + urls.grid(REPO) + "?q=script")
    assert XSS_CONFIG in page.locator("#grid tbody").inner_text()
