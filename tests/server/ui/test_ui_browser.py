"""The web UI in a real browser: navigate dashboard -> config -> run -> PR over real HTTP,
filter a table, count plot marks against the seeded data, keep a screenshot of each page."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.server.ui.ui_seed import (
    A2A_FAILED_COMMITS,
    LATEST_RUN,
    MAIN_RUNS,
    NAMES,
    PR,
    PR_FAILS,
    REPO,
    RUNS_WITH_FAILURES,
    XSS,
    XSS_CONFIG,
    a2a_fails,
    ring_shard,
)


def shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def test_navigate_dashboard_config_run_pull(page: Any, service: str, artifacts: Path) -> None:
    page.goto(f"{service}/ui/{REPO}")
    assert page.locator("h1").inner_text().startswith(REPO)
    # One trend point and one table row per main run; red points are the runs with failures.
    assert page.locator("svg#pass-rate circle.point").count() == MAIN_RUNS
    assert page.locator("svg#pass-rate title").first.text_content().startswith("Pass rate")
    assert page.locator("svg#pass-rate circle.point.fail").count() == RUNS_WITH_FAILURES
    assert page.locator("#runs tbody tr").count() == MAIN_RUNS
    assert page.locator("#pulls tbody tr").count() == 1
    assert "new failures" in page.locator("#pulls tbody tr").inner_text()
    shot(page, artifacts, "1-dashboard")

    page.locator("#flaky a", has_text="[a2a]").click()
    page.wait_for_url("**/config?config=*")
    assert "[a2a]@2" in page.locator("h1").inner_text()
    # One cell per commit (the main runs and the PR head), red where a2a failed.
    assert page.locator("svg#timeline rect.cell").count() == MAIN_RUNS + 1
    assert page.locator("svg#timeline rect.cell[data-state=fail]").count() == A2A_FAILED_COMMITS
    assert page.locator("svg#durations circle.point").count() == MAIN_RUNS + 1
    assert page.locator("svg#durations circle.point.fail").count() == A2A_FAILED_COMMITS
    assert page.locator("svg#metric-0 text.plot-title").text_content() == "max_abs_err per commit"
    signatures = page.locator("#signatures tbody tr")
    assert signatures.count() == 1  # the messages differ only in numbers and addresses
    assert signatures.locator("td").first.inner_text() == str(A2A_FAILED_COMMITS)
    assert "<b>NCCL</b> watchdog timeout after Ns on <addr> rank N" in signatures.inner_text()
    shot(page, artifacts, "2-config")

    last_failed = max(r for r in range(1, MAIN_RUNS + 1) if a2a_fails(r))
    page.locator("svg#timeline a:has(rect[data-state=fail])").last.click()
    page.wait_for_url(f"**/runs/{1000 + last_failed}")
    assert page.locator("#shards tbody tr").count() == 2
    rows = page.locator("#results tbody tr")
    assert rows.count() == len(NAMES)
    page.locator("input[name=q]").fill("a2a")  # filters this page at once (JavaScript)
    assert page.locator("#results tbody tr:visible").count() == 1
    page.locator("input[name=q]").fill("")
    page.locator("input[name=outcome][value=failed]").check()  # submits the form
    page.wait_for_url("**outcome=failed**")
    outcomes = page.locator("#results tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.outcome)"
    )
    ring_failed = ring_shard(last_failed) == 1
    assert outcomes == ["failed"] * (1 + ring_failed)  # a2a, and ring when it ran on gpu-b
    shot(page, artifacts, "3-run")

    page.goto(f"{service}/ui/{REPO}")
    page.locator("#pulls a", has_text=f"#{PR}").click()
    page.wait_for_url(f"**/pulls/{PR}")
    new = page.locator("table[data-verdict=new_failure] tbody tr")
    assert new.count() == len(PR_FAILS)
    assert "[p2p]" in new.last.inner_text()  # sorted by config id: `<` before `p`
    assert "<i>p2p</i> mismatch" in new.last.inner_text()
    assert "No file-consistency check stored" in page.inner_text("#consistency-h + *")
    shot(page, artifacts, "4-pull")


def test_html_in_names_and_messages_renders_as_text(
    page: Any, service: str, artifacts: Path, dialogs: list[str]
) -> None:
    pages = [
        f"/ui/{REPO}",
        f"/ui/{REPO}/config?config={quote(XSS_CONFIG)}",
        f"/ui/{REPO}/runs/{LATEST_RUN}?q={quote(XSS)}",
        f"/ui/{REPO}/pulls/{PR}",
    ]
    for path in pages:
        page.goto(service + path)
        assert XSS in page.locator("main").inner_text(), path
        # Only the UI's own script element exists; nothing from the data became markup.
        assert page.locator("script").count() == 1, path
        assert page.locator("main b, main i").count() == 0, path
    shot(page, artifacts, "5-xss-config")
    assert dialogs == []
