"""A rank's exit file: what the shim writes, and the line the parent makes of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner.wire.rank_exit import RankExit, how_it_ended

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def test_a_signal_is_recorded_by_name_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "rank-1.exit"
    RankExit.of(rank=1, pid=99, returncode=-11, t=5.0).write(path)
    assert RankExit.read(path) == RankExit(rank=1, pid=99, returncode=-11, t=5.0, signal="SIGSEGV")
    ended = how_it_ended(path)
    assert ended.message == "rank 1 was killed by SIGSEGV (pid 99)"
    assert (ended.t, ended.stopped, ended.recorded) == (5.0, False, True)


@pytest.mark.parametrize(
    ("returncode", "message", "stopped"),
    [
        (-15, "rank 0 was stopped (SIGTERM) after another rank ended", True),
        (3, "rank 0 exited with code 3 (pid 7)", False),
    ],
)
def test_how_a_rank_ended(tmp_path: Path, returncode: int, message: str, stopped: bool) -> None:
    path = tmp_path / "rank-0.exit"
    RankExit.of(rank=0, pid=7, returncode=returncode, t=1.0).write(path)
    ended = how_it_ended(path)
    assert (ended.message, ended.stopped) == (message, stopped)


@pytest.mark.parametrize("content", [None, "", '{"rank": 0}'])
def test_a_missing_or_torn_exit_file_says_the_launcher_was_killed(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "rank-0.exit"
    if content is not None:
        path.write_text(content)
    ended = how_it_ended(path)
    assert ended.message == "no exit status recorded (the rank's launcher was killed)"
    assert (ended.t, ended.recorded) == (None, False)
