"""The parent's session, end to end: a config that cannot be planned fails alone, several worlds
run at once with progress lines, pytest never waits for a record that cannot come (and leaves no
world directory behind), and a kept world directory holds its world's protocol, every line
typed."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started

SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
def test_passes(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_fails_on_rank_1(cpci_dist):
    assert cpci_dist.rank == 0
"""


def test_kept_worlds_hold_plan_feed_journals_agreed_records_and_exits(tmp_path: Path) -> None:
    (tmp_path / "test_kept.py").write_text(SUITE)
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = run_pytest(tmp_path, "-q", env={"TMPDIR": str(temp), "CPCI_KEEP_WORLDS": "1"})
    result.assert_outcomes(passed=1, failed=1)
    [run_dir] = sorted(temp.glob("cpci-run-*"))
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


def test_a_config_that_cannot_be_planned_fails_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cpci(world_size=0)
        def test_bad_world(cpci_dist):
            pass
        @pytest.mark.cpci(world_size=2, colour="red")
        def test_bad_argument(cpci_dist):
            pass
        @pytest.mark.cpci(world_size=2)
        def test_good(cpci_dist):
            pass
        def test_fixture_outside_a_world(cpci_dist):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines(
        [
            "*cpci_dist needs @pytest.mark.cpci(world_size=N) on the test*",
            "*cpci marker needs world_size=<int >= 1>, got 0*",
            "*cpci marker of test_bad_argument got unknown argument(s) [[]'colour'[]]*",
        ]
    )


def test_several_worlds_at_once_with_progress_lines(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import time
        import pytest
        import torch.distributed as dist
        @pytest.mark.cpci(world_size=1)
        @pytest.mark.parametrize("i", range(3))
        def test_alone(i, cpci_dist):
            # Work that outlasts several progress intervals, so the line is due while worlds run.
            time.sleep(1.0)
            assert dist.get_world_size() == 1
        """
    )
    result = pytester.runpytest_subprocess(
        "--cpci-workers=2", "--cpci-batch-size=1", "--cpci-progress-interval=0.1"
    )
    result.assert_outcomes(passed=3)
    assert worlds_started(result.stdout.str()) == 3
    result.stdout.fnmatch_lines(
        ["cpci: */3 configs done, 0 failed, * left, elapsed *, ETA *, [12] world(s) running"]
    )


#: A parent-side conftest: receiving every record of `test_c` fails, as a scheduler error would
#: (the in-process scheduler tests script the other ways, `tests/runner/parent/test_scheduler.py`).
FAILING_RECEIVE = """
import os

from cpci.runner.parent.session import ParentSession

receive = ParentSession._receive


def failing_receive(self, sent):
    if sent.spec.nodeid.endswith("test_c"):
        raise OSError("the results file could not be written")
    receive(self, sent)


ParentSession._receive = failing_receive
"""

ERROR_SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
def test_a(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_b(cpci_dist):
    assert False, "a real failure"

@pytest.mark.cpci(world_size=2)
def test_c(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_d(cpci_dist):
    pass
"""


def test_pytest_never_waits_for_a_record_that_cannot_be_received(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even the `not_run` record of `test_c` cannot be received: the thread settling it ends,
    and pytest reports what it did not get instead of waiting for ever. Without
    CPCI_KEEP_WORLDS, even this run leaves no run directory behind."""
    pytester.makeconftest(FAILING_RECEIVE)
    pytester.makepyfile(test_error=ERROR_SUITE)
    temp = pytester.mkdir("tmp")
    monkeypatch.setenv("TMPDIR", str(temp))
    result = pytester.runpytest_subprocess(
        "--cpci-results=r.jsonl", "--cpci-max-respawns=0", timeout=300
    )
    result.assert_outcomes(passed=1, failed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of test_c _*",
            "not run: cpci's scheduler stopped before this config had a record (OSError: the "
            "results file could not be written)",
            "*_ ERROR at setup of test_d _*",
            "not run: cpci's scheduler stopped before this config had a record*",
        ]
    )
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    assert [records[f"test_error.py::test_{n}"]["outcome"] for n in "cd"] == ["not_run"] * 2
    assert (
        "OSError: the results file" in records["test_error.py::test_c"]["rank_errors"][0]["detail"]
    )
    assert sorted(temp.glob("cpci-run-*")) == []
