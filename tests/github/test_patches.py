"""The three-way merge that carries a change to a twin, and diffs that `git apply` takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.github.patches import merge3, unapply, unified_diff
from tests.github.pairs import git_apply

LINES = [f"line {i}\n" for i in range(1, 21)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(LINES, ["first\n", *LINES], id="insert at the top"),
        pytest.param(LINES, [*LINES[:10], "middle\n", *LINES[11:]], id="replace in the middle"),
        pytest.param(LINES, LINES[:-1], id="drop the last line"),
        pytest.param([*LINES[:-1], "line 20"], [*LINES[:-1], "last"], id="no newline at the end"),
        pytest.param([*LINES[:-1], "line 20"], LINES, id="a newline added at the end"),
        pytest.param(LINES, LINES[:2] + LINES[5:15] + ["x\n"] + LINES[15:], id="two hunks"),
    ],
)
def test_git_applies_the_diff(tmp_path: Path, old: list[str], new: list[str]) -> None:
    patch = unified_diff(old, new, path="pkg/mod.py")
    after = git_apply(tmp_path, {"pkg/mod.py": "".join(old)}, patch)
    assert after["pkg/mod.py"] == "".join(new)


def test_equal_lines_have_no_diff_and_a_part_is_numbered_where_it_starts() -> None:
    assert unified_diff(LINES, LINES, path="a.py") == ""
    part = unified_diff(["a\n", "b\n"], ["a\n", "c\n"], path="a.py", old_start=40, new_start=42)
    assert "@@ -40,2 +42,2 @@\n a\n-b\n+c\n" in part


def test_merge_takes_the_change_and_keeps_the_twins_own_lines() -> None:
    base = ["def f():\n", "    a = 1\n", "    b = 2\n", "    return a + b\n"]
    theirs = [*base[:3], "    return a * b\n"]
    ours = [base[0], "    a = one()\n", *base[2:]]
    merged = merge3(base, ours, theirs)
    assert merged.lines == (base[0], "    a = one()\n", base[2], "    return a * b\n")


def test_merge_of_a_change_already_there_is_the_twin_and_a_clash_is_a_conflict() -> None:
    base = ["a\n", "b\n", "c\n"]
    theirs = ["a\n", "B\n", "c\n"]
    assert merge3(base, theirs, theirs).lines == tuple(theirs)
    clash = merge3(base, ["a\n", "beta\n", "c\n"], theirs)
    assert clash.lines is None
    assert clash.conflicts == ((1, 2),)


def _github_patch(old: list[str], new: list[str]) -> str:
    """What GitHub's file list holds as a file's `patch`: the hunks, no file headers."""
    return unified_diff(old, new, path="f").split("\n", 3)[3].rstrip("\n")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (LINES, ["first\n", *LINES]),
        (LINES, [*LINES[:10], "middle\n", *LINES[11:]]),
        (LINES, LINES[:2] + LINES[5:15] + ["x\n"] + LINES[15:]),
        ([*LINES[:-1], "line 20"], [*LINES[:-1], "last"]),
        ([*LINES[:-1], "line 20"], LINES),
        ([], LINES[:3]),
    ],
)
def test_a_patch_undone_gives_the_file_before_it(old: list[str], new: list[str]) -> None:
    assert unapply(new, _github_patch(old, new)) == old


def test_hunks_that_do_not_fit_the_file_are_refused() -> None:
    patch = _github_patch(LINES, [*LINES[:10], "middle\n", *LINES[11:]])
    assert unapply(LINES, patch) is None  # these lines are the file before, not after
    # GitHub's own example patch: two hunk headers on one line, no body.
    assert unapply(LINES * 100, "@@ -132,7 +132,7 @@ module Test @@ -1000,7 +1000,7 @@") is None
    assert unapply(LINES, "not a hunk") is None
    assert unapply(LINES, "") == LINES
