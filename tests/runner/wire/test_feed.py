"""A world's feed: ranks read entries in order, each with the one after it, until the Close."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cpci.runner.wire.feed import FeedReader, FeedWriter
from cpci.runner.wire.protocol import PlanEntry

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def entry(index: int) -> PlanEntry:
    return PlanEntry(index=index, nodeid=f"t.py::test_a[{index}]")


def test_each_entry_comes_with_the_next_and_the_last_with_none(tmp_path: Path) -> None:
    writer = FeedWriter(tmp_path / "feed.jsonl")
    for index in (3, 0, 7):
        writer.add(entry(index))
    writer.close()
    reader = FeedReader(tmp_path / "feed.jsonl")
    steps = []
    while (step := reader.next()) is not None:
        steps.append((step[0].index, None if step[1] is None else step[1].index))
    assert steps == [(3, 0), (0, 7), (7, None)]
    assert reader.next() is None  # closed stays closed


def test_a_rank_waits_for_the_next_entry_until_the_parent_writes_it(tmp_path: Path) -> None:
    writer = FeedWriter(tmp_path / "feed.jsonl")
    writer.add(entry(0))
    reader = FeedReader(tmp_path / "feed.jsonl")
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(reader.next()))
    thread.start()
    thread.join(timeout=0.2)
    assert thread.is_alive()  # entry 0 alone: its nextitem is not known yet
    writer.add(entry(1))
    thread.join(timeout=30)
    assert got == [(entry(0), entry(1))]
    writer.close()
    assert reader.next() == (entry(1), None)
    assert reader.next() is None


def test_nothing_may_follow_the_close(tmp_path: Path) -> None:
    writer = FeedWriter(tmp_path / "feed.jsonl")
    writer.close()
    writer.close()  # once is enough; twice is harmless
    with pytest.raises(RuntimeError, match="is closed"):
        writer.add(entry(0))
    assert FeedReader(tmp_path / "feed.jsonl").next() is None
