"""In Chromium at a phone's and a desktop's width: the dashboard says which config is broken on
main since which commit; its config page shows the culprit range (last good, the commits never
run, first bad); a quarantined config's page says who, why, since when and the straight passes
its release needs; an order-dependent config's page the polluters seen. Each page fits the
screen, its tables scrolling in their box."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cpci import urls
from cpci.evidence import passes_to_release
from cpci.schema import FlakeRecord, OrderDependence, ResultRecord
from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from tests.builders import REPO, config, envelope, nodeid, record, send, sha
from tests.live_server import serve
from tests.server.databases import migrate_with_token
from tests.server.ui.test_ui_layout import EMOJI, TABLE_EDGES
from tests.server.ui.ui_seed import A2A, MAIN_RUNS, seed

VICTIM, SHY = config("victim"), config("shy")
#: After the seed's main runs: victim passes on 13-16, 17 and 18 never run, fails from 19.
PASSING, UNRUN, FAILING = range(13, 17), range(17, 19), range(19, 22)
TIP = FAILING[-1]


def results(k: int) -> list[ResultRecord]:
    if k in FAILING:
        out = [record("victim", "failed", attempt=a, message="out differs") for a in (1, 2, 3)]
    else:
        out = [record("victim")]
    dependence = OrderDependence(polluters=[nodeid("p2p")], replays=3, searched=5)
    shy = (
        record("shy", "failed", isolation="order-dependent", order_dependence=dependence)
        if k in (14, 20)
        else record("shy")
    )
    return [*out, shy]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The UI seed, main's first-parent links, main runs that break victim after two commits
    nobody ran, and a2a quarantined."""
    url = f"sqlite:///{tmp_path_factory.mktemp('triage') / 'cpci.db'}"
    engine = create_db_engine(url)
    token = migrate_with_token(engine, name="ui")
    try:
        with serve(create_app(Settings(database_url=url), engine=engine)) as base:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                seed(http)
                parents = [{"commit": sha(k), "parent": sha(k - 1)} for k in range(2, TIP + 1)]
                linked = http.post(
                    urls.api_commits(REPO), json={"branch": "main", "parents": parents}
                )
                assert linked.status_code == 200, linked.text
                for k in [*PASSING, *FAILING]:
                    body = envelope(results(k), commit=sha(k), ci_run_id=str(3000 + k))
                    assert send(http, body).status_code == 201
                held = http.post(
                    urls.api_quarantines(REPO),
                    json={"config": A2A, "reason": "flaky since the NCCL bump, #314"},
                )
                assert held.status_code == 201, held.text
            yield base
    finally:
        engine.dispose()


def fits(page: Any, width: int) -> None:
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    for t in page.evaluate(TABLE_EDGES):
        assert t["scrolls"] or t["table"] <= t["box"] + 1, t
        assert t["box"] <= width, t
    assert EMOJI.search(page.locator("body").inner_text()) is None


@pytest.mark.parametrize("width", [390, 1400])
def test_the_dashboard_says_broken_since_and_the_config_page_shows_the_range(
    page: Any, service: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(service + urls.dashboard(REPO))
    rows = page.locator("#broken tbody tr")
    assert rows.count() == 1
    row = rows.first
    assert "victim" in row.locator("td.config").inner_text()
    assert row.locator(".broken-since").inner_text() == f"broken since {sha(FAILING[0])[:10]}"
    assert row.locator("td").nth(2).inner_text() == sha(PASSING[-1])[:10]
    assert row.locator("td").nth(3).inner_text() == str(len(UNRUN))
    fits(page, width)

    row.locator("td.config a").click()
    page.wait_for_url("**/config?**")
    section = page.locator("#culprit")
    assert section.locator("h2").inner_text() == "Where it broke on main"
    cells = section.locator("#culprit-range tr")
    assert cells.nth(0).inner_text().split() == ["Last", "good", sha(PASSING[-1])]
    assert cells.nth(1).inner_text().split() == [
        "Never", "ran", "it", f"({len(UNRUN)})", *(sha(k)[:10] for k in UNRUN)
    ]  # fmt: skip
    assert cells.nth(2).inner_text().split() == ["First", "bad", sha(FAILING[0])]
    assert f"cpci culprit {REPO} '{VICTIM}' --dispatch" in section.inner_text()
    assert page.locator("#quarantine").count() == 0
    fits(page, width)


@pytest.mark.parametrize("width", [390, 1400])
def test_a_quarantine_and_the_polluters_on_their_config_pages(
    page: Any, service: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(service + urls.config(REPO, A2A))
    held = page.locator("#quarantine")
    text = held.inner_text()
    assert "flaky since the NCCL bump, #314" in text
    assert "By token:" in text
    needed = passes_to_release(FlakeRecord(failures=0, trials=0), 0.05, 0.95)
    assert (
        f"{needed} straight passes on main release it. (its failure rate bounded below 0.05 at "
        "the 95% level; since the quarantine: 0 of 0 attempts failed)"
    ) in text
    fits(page, width)

    page.goto(service + urls.config(REPO, SHY))
    rows = page.locator("#polluters tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("td").nth(0).inner_text() == "2"
    assert rows.first.locator("td").nth(1).inner_text().replace("\n", "") == (
        f"fails after {nodeid('p2p')}"
    )
    runs = page.locator("#order-dependence .note a")
    assert [runs.nth(i).inner_text() for i in range(runs.count())] == ["3020", "3014"]
    assert page.locator("#culprit").count() == 0  # it passes at the tip
    fits(page, width)


def test_nothing_extra_where_there_is_nothing_to_act_on(page: Any, service: str) -> None:
    page.goto(service + urls.config(REPO, config("p2p")))
    for section in ("#culprit", "#quarantine", "#order-dependence"):
        assert page.locator(section).count() == 0, section
    assert PASSING[0] > MAIN_RUNS  # the seed's main runs come first
