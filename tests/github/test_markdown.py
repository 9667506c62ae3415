"""Untrusted text in GitHub Markdown: in a table cell, a `|` (in a code span or plain text), a
backtick run or a newline keeps its cell, as a CommonMark parser with GFM tables reads it."""

from __future__ import annotations

from cpci.github import markdown
from tests.github.gfm import rendered_cells

HOSTILE = ["a|b", "x`|`y", "``|``", "ends with \\\\", "two\nlines | and\\|more", "|", "\\|"]


def test_hostile_values_keep_their_cells() -> None:
    lines = ["| config | message |", "|---|---|"]
    lines += [f"| {markdown.table_code(v)} | {markdown.text(v)} |" for v in HOSTILE]
    rows = rendered_cells("\n".join(lines) + "\n")
    assert len(rows) == len(HOSTILE)
    for value, row in zip(HOSTILE, rows, strict=True):
        shown = markdown.one_line(value)
        assert len(row) == 2, (value, row)
        assert row[0][0].strip() == shown.strip()  # the code span shows the value as it is
        assert row[1][1] == shown  # so does the escaped text
