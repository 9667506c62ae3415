"""The parent's session: a kept world directory holds its world's protocol, every line typed."""

from __future__ import annotations

from pathlib import Path

from cpci.runner.wire.journal import JournalReader
from cpci.runner.wire.protocol import (
    Begin,
    Close,
    Done,
    End,
    Hello,
    PlanEntry,
    Ready,
    WorldPlan,
    parse_agreed_record,
    parse_feed_message,
    parse_journal_event,
)
from tests.runner.helpers import run_pytest

SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
def test_passes(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_fails_on_rank_1(cpci_dist):
    assert cpci_dist.rank == 0
"""


def _run(path: Path, keep: str) -> list[Path]:
    """Run the suite with CPCI_KEEP_WORLDS=`keep`; the run directories left in its temp dir."""
    temp = path / f"tmp-{keep or 'unset'}"
    temp.mkdir()
    result = run_pytest(path, "-q", env={"TMPDIR": str(temp), "CPCI_KEEP_WORLDS": keep})
    result.assert_outcomes(passed=1, failed=1)
    return sorted(temp.glob("cpci-run-*"))


def test_kept_worlds_hold_plan_feed_journals_agreed_records_and_exits(tmp_path: Path) -> None:
    (tmp_path / "test_kept.py").write_text(SUITE)
    [run_dir] = _run(tmp_path, "1")
    [world] = sorted(run_dir.glob("world-*"))
    plan = WorldPlan.model_validate_json((world / "plan.json").read_bytes())
    assert [Path(p).name for p in plan.collect] == ["test_kept.py"]
    *entries, close = JournalReader(world / "feed.jsonl", parse_feed_message).read_new()
    assert isinstance(close, Close)  # the queue ran dry: the world was told to finish
    assert all(isinstance(e, PlanEntry) for e in entries)
    assert [(e.index, e.nodeid.split("::")[1]) for e in entries if isinstance(e, PlanEntry)] == [
        (0, "test_passes"),
        (1, "test_fails_on_rank_1"),
    ]
    for rank in (0, 1):
        events = JournalReader(world / f"rank-{rank}.journal", parse_journal_event).read_new()
        # The session may end (and kill the world) while the ranks leave their process group.
        assert [type(e) for e in events][:6] == [Hello, Ready, Begin, End, Begin, End]
        assert len(events) in (6, 7)
        assert all(isinstance(e, Done) for e in events[6:])
        ends = [e for e in events if isinstance(e, End)]
        assert [(e.index, e.outcome) for e in ends] == [
            (0, "passed"),
            (1, "passed" if rank == 0 else "failed"),
        ]
    agreed = JournalReader(world / "outcomes.jsonl", parse_agreed_record).read_new()
    assert [(a.index, a.outcome, a.report_rank) for a in agreed] == [
        (0, "passed", 0),
        (1, "failed", 1),  # the reports shown are those of the rank that failed
    ]
    assert [e.rank for e in agreed[1].rank_errors] == [1]


def test_without_keep_worlds_the_run_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "test_gone.py").write_text(SUITE)
    assert _run(tmp_path, "") == []
