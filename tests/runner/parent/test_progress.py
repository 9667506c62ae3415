"""Progress lines say what a stalled world waits for and when its timeout ends it; the closing
summary counts the time configs spent until their timeout. In process, on the run's statistics;
a real world's stalled config on the line is in `test_faults.py`'s hang."""

from __future__ import annotations

import time

from cpci.runner.parent.progress import InFlight, RunStats

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def test_a_stalled_config_is_named_with_its_timeout_on_the_lines_clock() -> None:
    stats = RunStats()
    stats.planned(15)
    for n in range(8):
        stats.settled(f"t.py::test_{n}", "passed")
    stats.started_at = time.monotonic() - 60  # the run began a minute ago
    began = time.time() - 20  # and its config in flight twenty seconds ago
    stalled = InFlight("t.py::test_cp[2-hangs]", began, 300.0, "cpci's default")
    fresh = InFlight("t.py::test_cp[4-p2p]", time.time(), 10.0, "--cpci-timeout")
    line = stats.progress_line([stalled, fresh], stalled_s=10)
    assert line.startswith("cpci: 8/15 configs done, 0 failed, 0 not run, 7 left, elapsed 1:0")
    assert "; waiting on t.py::test_cp[2-hangs] for 0:2" in line
    # It ends 280 s from now, on a clock that reads 1:00 now.
    assert "its timeout (300 s, from cpci's default) ends it at 5:40" in line
    assert "test_cp[4-p2p]" not in line  # running for less than a progress interval


def test_the_summary_counts_time_until_timeouts() -> None:
    stats = RunStats()
    stats.planned(3)
    for _ in range(2):
        stats.world_started()
        stats.world_ended(None)
    stats.config_ran(0.8)
    stats.ended_on("t.py::test_hangs", "timeout", 10.0, first=True)
    for name in ("test_a", "test_b", "test_hangs"):
        stats.settled(f"t.py::{name}", "timeout" if name == "test_hangs" else "passed")
    assert stats.summary_lines() == [
        "2 world(s) started (0 respawn(s)), world start-up 0.0 s, configs 10.8 s "
        "(3 config(s); 10.0 s of it until 1 timeout(s))",
        "1 timed out:",
        "  t.py::test_hangs",
    ]
    assert (stats.done, stats.failed, stats.all_settled()) == (3, 1, True)
