"""Reading back the GitHub Markdown cpci writes, as a CommonMark parser with GFM tables does
(markdown-it-py's), for tests that check what a reader sees rather than the text written."""

from __future__ import annotations

import itertools

import pytest


def rendered_cells(table: str) -> list[list[tuple[str, str]]]:
    """Each body row's cells as (code span text, plain text), read by markdown-it's GFM tables."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py reads the table")
    parser = markdown_it.MarkdownIt("commonmark").enable("table")
    rows: list[list[tuple[str, str]]] = []
    tokens = parser.parse(table)
    for open_, inline in itertools.pairwise(tokens):
        if open_.type == "tr_open":
            rows.append([])
        if open_.type == "td_open":
            children = inline.children or []
            code = "".join(c.content for c in children if c.type == "code_inline")
            plain = "".join(c.content for c in children if c.type == "text")
            rows[-1].append((code, plain))
    return [row for row in rows if row]


def fenced_blocks(markdown: str, info: str) -> list[str]:
    """The text of each fenced code block with this info string, as a reader copies it."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py reads the blocks")
    tokens = markdown_it.MarkdownIt("commonmark").parse(markdown)
    return [t.content for t in tokens if t.type == "fence" and t.info == info]
