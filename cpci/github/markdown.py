"""Putting untrusted text (test ids, error messages) into GitHub Markdown safely.

Test ids and messages come from the code under test, i.e. from whoever opened the PR. Left raw,
`@org/team` pings people, `<details>` or `</summary>` breaks the layout, `[x](javascript:...)`
or `![](https://tracker)` injects links and images, and a stray ``` swallows the rest of the
comment. So untrusted text only ever appears as a code span or a fenced block (whose fence is
longer than any backtick run inside), or as plain text with every Markdown and HTML special
character neutralised and mentions broken; in a table cell a `|` is escaped too (`table_code`).
"""

from __future__ import annotations

import re

#: Control characters and bidirectional overrides ("Trojan Source") are dropped.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"#(?=\d)")
WORD_JOINER = "\u2060"


def clean(text: str) -> str:
    return _INVISIBLE.sub("", text)


def one_line(text: str, limit: int = 300) -> str:
    """The text on one line, cut to `limit` characters with an ellipsis."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def text(value: str, limit: int = 300) -> str:
    """Plain text, shown as written: no Markdown, no HTML, no mentions, no issue links."""
    flat = one_line(value, limit)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    flat = _MARKDOWN_SPECIAL.sub(r"\\\1", flat)
    flat = _MENTION.sub("@" + WORD_JOINER, flat)
    return _REFERENCE.sub("#" + WORD_JOINER, flat)


def code(value: str, limit: int = 300) -> str:
    """An inline code span that no backtick inside can close early (CommonMark 6.1)."""
    flat = one_line(value, limit)
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def table_code(value: str, limit: int = 300) -> str:
    """`code` for a cell of a GFM table: a `|` inside would end the cell, even in a code span,
    so it is escaped as `\\|`, which the table keeps in the cell and the span shows as `|`.
    (`text` escapes `|` already, so its output goes into a cell as it is.)"""
    return code(value, limit).replace("|", "\\|")


def fenced(value: str, language: str = "", limit: int = 4_000) -> str:
    """A fenced code block that no line inside can close early."""
    body = clean(value)
    if len(body) > limit:
        body = body[:limit] + "\n…"
    longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{body}\n{fence}"


def link(label: str, url: str) -> str:
    """A link to one of our own URLs (never a URL from untrusted input)."""
    if not re.fullmatch(r"https?://[^\s()<>]+|/[^\s()<>]*", url):
        return text(label)
    return f"[{text(label)}]({url})"


def details(summary: str, body: str, *, open_: bool = False) -> str:
    """A collapsed section; the blank lines let Markdown render inside the HTML block."""
    attribute = " open" if open_ else ""
    return f"<details{attribute}><summary>{summary}</summary>\n\n{body}\n\n</details>"
