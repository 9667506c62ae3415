"""The pages' layout in a real browser: config ids wrap only between their parts, beside a
message column that wraps anywhere, at a desktop's and a phone's width; the trend's x axis names
commits; the config page plots each commit's median and range, and says when its results ran;
the PR page leads with the gate's verdict; every page fits a phone and a desktop, its tables
scrolling in their own box, its icons drawn without an emoji font."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest

from cpci import urls
from cpci.schema import VERDICTS, ResultRecord
from tests.builders import envelope, record, sha
from tests.server.ui.ui_seed import A2A, MAIN_RUNS, PR, PR_HEAD, REPO, START

#: Config ids as long as a TransformerEngine-style suite's, with messages longer still.
LONG = [
    "cp_1_0-bf16-p2p-thd-causal-head_dim_128",
    "cp_2_1-fp16-a2a+p2p-bshd-no_mask",
    "cp_1_1-fp8-all_gather-sbhd-padding_causal_bottom_right",
]
NODEID = "tests/pytorch/attention/test_attention_with_cp.py::test_cp_with_flash_attention[{}]"
MESSAGE = (
    "AssertionError: Tensor-likes are not close! Mismatched elements: 1234 / 65536 (1.9%) "
    "Greatest absolute difference: 0.0625 at index (0, 12, 3, 7) "
    "/very/long/path/to/transformer_engine/pytorch/attention/dot_product_attention/cp.py:1234"
)
WRAP_RUN = "layout-1"


def _long(name: str) -> ResultRecord:
    return record(name, "failed", message=MESSAGE, nodeid=NODEID.format(name))


PENDING_PR = 8
#: A run of long ids on a branch of its own (its dashboard's slowest configs are those ids), two
#: runs of a2a at one commit (1 s and 3 s), the first uploaded without its shard's times (an
#: older uploader's), after the seed's main runs, which all say when they ran; and a pull
#: request with one of its two shards in.
EXTRA_UPLOADS = [
    envelope([_long(n) for n in LONG], ci_run_id=WRAP_RUN, branch="layout", commit=sha(90)),
    envelope([record("a2a")], ci_run_id="layout-2", branch="rerun", commit=sha(91)),
    envelope(
        [record("a2a", duration_s=3.0)],
        ci_run_id="layout-3",
        branch="rerun",
        commit=sha(91),
        started_at="2025-02-01T00:00:00+00:00",
    ),
    envelope(
        [record("p2p", "failed", message="boom")],
        ci_run_id="pending-1",
        pull_request=PENDING_PR,
        branch="wip",
        commit=sha(92),
        base_commit=sha(MAIN_RUNS),
        shard_total=2,
    ),
]

#: Where a config id may wrap: after these, or before a `[`.
BREAKS_AFTER = ("/", ":", "-")

LINE_BREAKS = """cell => {
  // Each pair of characters a line break falls between, read from the glyphs' boxes.
  const pairs = [];
  let previous = null, top = null;
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getClientRects()[0];
      if (!box) continue;
      if (top !== null && box.top > top + 1) pairs.push(previous + node.data[i]);
      previous = node.data[i];
      top = box.top;
    }
  }
  return pairs;
}"""


@pytest.mark.parametrize("width", [1400, 390])
def test_config_ids_wrap_only_between_their_parts(page: Any, service: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{service}/ui/{REPO}/runs/{WRAP_RUN}")
    cells = page.locator("#results td.config")
    assert cells.count() == len(LONG)
    breaks = [cells.nth(i).evaluate(LINE_BREAKS) for i in range(cells.count())]
    assert all(a in BREAKS_AFTER or b == "[" for pairs in breaks for a, b in pairs), breaks
    messages = page.locator("#results td.message")
    assert all(len(messages.nth(i).evaluate(LINE_BREAKS)) >= 1 for i in range(len(LONG)))
    # The page never scrolls sideways: a table wider than the screen scrolls in its own box.
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    config_w, message_w = (
        page.locator(f"#results tbody tr:first-child td.{name}").bounding_box()["width"]
        for name in ("config", "message")
    )
    if width == 1400:
        # Ids get the room they need before messages do: one break at most, at a boundary.
        assert config_w >= message_w
        assert all(len(pairs) <= 1 for pairs in breaks), breaks
    else:
        assert any(pairs for pairs in breaks)  # a phone's column is narrow: ids do wrap


def test_the_trend_names_each_runs_commit(page: Any, service: str) -> None:
    page.goto(f"{service}/ui/{REPO}")
    ticks = page.locator("svg#pass-rate text.tick.x")
    assert ticks.evaluate_all("ts => ts.map(t => t.firstChild.data)") == [
        sha(run)[:7] for run in range(1, MAIN_RUNS + 1)
    ]
    titles = ticks.evaluate_all("ts => ts.map(t => t.querySelector('title').textContent)")
    assert titles[0].startswith(f"run 1001 @ {sha(1)[:10]}, uploaded 20")
    assert titles[0].endswith(" UTC")
    label = page.locator("svg#pass-rate text.axis-label").first.text_content()
    assert label == "commit (oldest → newest)"


def test_the_config_page_plots_each_commit_at_its_median_with_its_range(
    page: Any, service: str
) -> None:
    page.goto(f"{service}/ui/{REPO}/config?config={A2A}")
    plot = page.locator("svg#durations")
    label = plot.locator("text.axis-label").first.text_content()
    assert label == "commit (oldest → newest): median, and the range of its results"
    # One mark per commit, oldest left: the main runs, the PR head, the layout branch's commit.
    commits = [sha(run) for run in range(1, MAIN_RUNS + 1)] + [PR_HEAD, sha(91)]
    marks = plot.locator("circle.point")
    assert marks.count() == len(commits)
    xs = marks.evaluate_all("cs => cs.map(c => Number(c.getAttribute('cx')))")
    assert xs == sorted(xs)
    titles = marks.evaluate_all("cs => cs.map(c => c.querySelector('title').textContent)")
    assert [t[:10] for t in titles] == [c[:10] for c in commits]
    # The seed's results say when their shards ran (an hour apart from START), not today.
    assert titles[0].startswith(
        f"{sha(1)[:10]}, run 1001, {START + timedelta(hours=1):%Y-%m-%d %H:%M} UTC"
    )
    # Two results at the last commit, 1 s and 3 s: one mark at their median, a bar across both,
    # linking to the newer run; a commit with one result has no bar.
    assert "median 2 s of 2 result(s), 1 to 3 s" in titles[-1]
    assert plot.locator("a").last.get_attribute("href").endswith("/runs/layout-3")
    bars = plot.locator("line.range")
    assert bars.count() == 1
    top, bottom = (float(bars.get_attribute(a)) for a in ("y2", "y1"))
    centre = float(marks.last.get_attribute("cy"))
    assert top < centre < bottom
    # The x axis names commits, as the pass-rate trend does.
    ticks = plot.locator("text.tick.x").evaluate_all("ts => ts.map(t => t.firstChild.data)")
    assert ticks[-1] == sha(91)[:7]
    assert set(ticks) <= {c[:7] for c in commits}


#: What ui.css colours each gate's headline with (its left border): red, green, grey, amber.
GATE_COLOURS = {
    "failure": "rgb(198, 40, 40)",
    "success": "rgb(46, 125, 50)",
    "neutral": "rgb(158, 158, 158)",
    "pending": "rgb(191, 135, 0)",
}


@pytest.mark.parametrize(("number", "gate"), [(PR, "failure"), (PENDING_PR, "pending")])
def test_the_pull_page_leads_with_the_verdict_in_the_gates_colour(
    page: Any, service: str, number: int, gate: str
) -> None:
    twin = httpx.get(service + urls.api_pull_page(REPO, number), timeout=30).json()
    assert twin["gate"] == gate
    page.goto(service + urls.pull(REPO, number))
    # Right under the title, before anything else: the verdict, then its counts per verdict.
    first = page.locator("main > h1 + *")
    assert first.get_attribute("id") == "headline"
    assert first.get_attribute("data-gate") == gate
    colour = first.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert colour == GATE_COLOURS[gate]
    counts = first.locator(".verdict-counts li").evaluate_all(
        "ls => ls.map(l => [l.dataset.verdict, Number(l.querySelector('strong').textContent)])"
    )
    by_verdict = twin["report"]["counts"]["by_verdict"]
    assert dict(counts) == {v: n for v, n in by_verdict.items() if n}
    assert [v for v, _ in counts] == [v.name for v in VERDICTS if by_verdict.get(v.name)]
    # The shard status is beside the verdict, on its line, not above it.
    verdict_box = first.locator(".gate-title").bounding_box()
    status = first.locator("#shard-status")
    assert status.inner_text().strip() == twin["report"]["shards"]["text"]
    status_box = status.bounding_box()
    assert status_box["x"] > verdict_box["x"] + verdict_box["width"]
    assert status_box["y"] < verdict_box["y"] + verdict_box["height"]


#: One page of each kind, with the widest content the seed holds.
PAGES = [
    urls.dashboard(REPO),
    urls.dashboard(REPO, branch="layout"),  # its slowest configs are the long ids
    urls.grid(REPO),
    urls.grid(REPO, branch="layout"),
    urls.config(REPO, A2A),
    urls.config(REPO, f"{NODEID.format(LONG[2])}@2"),
    urls.run(REPO, WRAP_RUN),
    urls.pull(REPO, PR),
    urls.pull(REPO, PENDING_PR),
]

#: For each table: the right edge of the box that must hold it (its nearest ancestor that
#: scrolls or clips, else <main>'s content box), and the table's own right edge.
TABLE_EDGES = """() => [...document.querySelectorAll("main table")].map(table => {
  const holds = e => ["auto", "scroll", "hidden"].includes(getComputedStyle(e).overflowX);
  let box = table.parentElement;
  while (box.tagName !== "MAIN" && !holds(box)) box = box.parentElement;
  const edge = box.tagName === "MAIN"
    ? box.getBoundingClientRect().right - parseFloat(getComputedStyle(box).paddingRight)
    : box.getBoundingClientRect().right;
  return {id: table.id || table.className, scrolls: box.tagName !== "MAIN", box: edge,
          table: table.getBoundingClientRect().right};
})"""
#: Emoji and symbol blocks that need an emoji font (the pages draw icons as inline SVG).
EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\u23e9-\u23fa\U0001f000-\U0001faff\ufe0f]")


@pytest.mark.parametrize("width", [390, 1400])
def test_every_page_fits_the_screen_and_its_tables_scroll_in_their_box(
    page: Any, service: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    for path in PAGES:
        page.goto(service + path)
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth"), path
        tables = page.evaluate(TABLE_EDGES)
        assert tables, path
        for t in tables:
            # A table wider than its box scrolls inside it; none runs past its box or the page.
            assert t["scrolls"] or t["table"] <= t["box"] + 1, (path, t)
            assert t["box"] <= width, (path, t)
        assert EMOJI.search(page.locator("body").inner_text()) is None, path
