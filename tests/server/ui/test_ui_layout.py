"""The pages' layout in a real browser: config ids wrap only between their parts, beside a
message column that wraps anywhere, at a desktop's and a phone's width; the trend's x axis names
commits; the config page plots results at when their shards ran, and says so."""

from __future__ import annotations

from typing import Any

import pytest

from cpci.schema import ResultRecord
from tests.builders import envelope, record, sha
from tests.server.ui.ui_seed import A2A, MAIN_RUNS, REPO, START

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


#: A run of long ids on a branch of its own, and one a2a result uploaded without its shard's
#: times (an older uploader's), after the seed's main runs, which all say when they ran.
EXTRA_UPLOADS = [
    envelope([_long(n) for n in LONG], ci_run_id=WRAP_RUN, branch="layout", commit=sha(90)),
    envelope([record("a2a")], ci_run_id="layout-2", branch="layout", commit=sha(91)),
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


def test_the_config_page_plots_results_when_their_shards_ran(page: Any, service: str) -> None:
    page.goto(f"{service}/ui/{REPO}/config?config=tests/test_cp.py::test_attn[p2p]@2")
    label = page.locator("svg#durations text.axis-label").first.text_content()
    assert label == "when the shard ran (UTC)"
    # The seed's runs ran an hour apart from START: the ticks are those hours, not today.
    ticks = page.locator("svg#durations text.tick.x").evaluate_all(
        "ts => ts.map(t => t.textContent)"
    )
    assert ticks
    assert all(t.startswith(f"{START:%m-%d}") for t in ticks), ticks

    page.goto(f"{service}/ui/{REPO}/config?config={A2A}")
    label = page.locator("svg#durations text.axis-label").first.text_content()
    assert label == "when the shard ran (UTC); upload time for 1 result(s) sent without it"
    metric = page.locator("svg#metric-0 text.axis-label").first.text_content()
    assert metric == "when the shard ran (UTC)"  # the timeless result recorded no metric
