"""Carrying a change from one function to its twin: a three-way merge on the function's lines,
unified diffs that `git apply` takes, and a diff's hunks undone (a PR's file at its merge base,
from the file at the head and GitHub's `patch` of it).

The merge takes the PR's change to a function (`base` -> `theirs`) onto the twin as it is now
(`ours`). Where the twin still reads like the base, it gets the change; where the twin differs
and the PR did not touch that part, it keeps its own lines; where both differ, the change does
not apply and the merge says where. This is diff3's rule, on lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

NO_NEWLINE = "\\ No newline at end of file\n"
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Merge:
    """The twin with the change (`lines`), or None where it does not apply: `conflicts` holds
    the ranges of `ours` (0-based, end exclusive) that differ where `theirs` changed `base`."""

    lines: tuple[str, ...] | None
    conflicts: tuple[tuple[int, int], ...] = ()


def merge3(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> Merge:
    """`theirs`' change from `base`, applied to `ours` (each a list of lines)."""
    merged: list[str] = []
    conflicts: list[tuple[int, int]] = []
    b0 = o0 = t0 = 0
    for b1, o1, t1, size in _stable_regions(base, ours, theirs):
        old, mine, new = base[b0:b1], ours[o0:o1], theirs[t0:t1]
        if mine in (old, new):
            merged += new
        elif new == old:
            merged += mine
        else:
            conflicts.append((o0, o1))
        merged += ours[o1 : o1 + size]
        b0, o0, t0 = b1 + size, o1 + size, t1 + size
    if conflicts:
        return Merge(None, tuple(conflicts))
    return Merge(tuple(merged))


def _stable_regions(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]
) -> list[tuple[int, int, int, int]]:
    """Runs of base lines that both sides kept as they were: (base, ours, theirs, length), the
    last one empty at the three ends."""
    mine = SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks()
    new = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    regions: list[tuple[int, int, int, int]] = []
    i = j = 0
    while i < len(mine) - 1 and j < len(new) - 1:
        a, b = mine[i], new[j]
        start = max(a.a, b.a)
        end = min(a.a + a.size, b.a + b.size)
        if start < end:
            regions.append((start, a.b + start - a.a, b.b + start - b.a, end - start))
        if a.a + a.size < b.a + b.size:
            i += 1
        else:
            j += 1
    regions.append((len(base), len(ours), len(theirs), 0))
    return regions


def unified_diff(
    old: Sequence[str],
    new: Sequence[str],
    *,
    path: str,
    old_start: int = 1,
    new_start: int = 1,
    context: int = 3,
) -> str:
    """A unified diff of `path` from `old` to `new` lines (with their line ends), numbered from
    `old_start` and `new_start`; "" when they are equal. Given whole files, `git apply` takes
    it; given a function's lines and where it starts, it shows that part of a file's diff."""
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    hunks = []
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        header = (
            f"@@ -{_range(first[1] + old_start - 1, last[2] - first[1])} "
            f"+{_range(first[3] + new_start - 1, last[4] - first[3])} @@\n"
        )
        body = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                body += [_line(" ", line) for line in old[i1:i2]]
                continue
            body += [_line("-", line) for line in old[i1:i2]]
            body += [_line("+", line) for line in new[j1:j2]]
        hunks.append(header + "".join(body))
    if not hunks:
        return ""
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + "".join(hunks)


def _range(start: int, length: int) -> str:
    """A hunk's `start,length` as diff writes it: an empty range names the line before it."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _line(mark: str, line: str) -> str:
    return f"{mark}{line}" if line.endswith(("\n", "\r")) else f"{mark}{line}\n{NO_NEWLINE}"


def unapply(new: Sequence[str], hunks: str) -> list[str] | None:
    """The lines before a diff, from the lines after it (with their ends) and its hunks (a
    PR file's `patch`, as GitHub lists it: `@@` headers and ` `, `-`, `+` lines, no file
    headers); None where the hunks do not fit the lines, or their own headers."""
    old: list[str] = []
    at = 0  # the next line of `new` not yet accounted for
    for chunk in re.split(r"\n(?=@@ )", hunks.strip("\n")) if hunks.strip() else []:
        header, *body = chunk.split("\n")
        match = _HUNK.match(header)
        if match is None:
            return None
        old_count, new_count = (int(n) if n is not None else 1 for n in (match[1], match[3]))
        start = int(match[2]) - (1 if new_count else 0)
        if start < at or start > len(new):
            return None
        old += new[at:start]
        at, before = start, len(old)
        previous = ""
        for line in body:
            mark, text = (line[:1], line[1:]) if line else (" ", "")  # a bare blank context line
            if mark == "\\":  # the line before has no newline at the end of its file
                if previous == "-":
                    old[-1] = old[-1].rstrip("\n")
                continue
            previous = mark
            if mark == "-":
                old.append(text + "\n")
            elif mark in (" ", "+") and at < len(new) and _body(new[at]) == text:
                old += [new[at]] if mark == " " else []
                at += 1
            else:
                return None
        if (len(old) - before, at - start) != (old_count, new_count):
            return None
    return old + list(new[at:])


def _body(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line
