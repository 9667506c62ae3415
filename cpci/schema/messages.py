"""The one line a table, a comment or a signature shows for a failure message.

Uploaded messages can be tracebacks of any length; every reader shows their first line, cut
to one length, so the comment, the run page and the verdict's reason quote a failure alike.
"""

from __future__ import annotations

#: Characters of a message's first line that a table shows.
FIRST_LINE_MAX = 300


def first_line(text: str, limit: int | None = FIRST_LINE_MAX) -> str:
    """The first non-blank line of `text`, stripped and cut to `limit` ("" for blank text).

    `limit=None` keeps the whole line, for a caller that clips it its own way (with an ellipsis).
    """
    stripped = text.strip()
    return stripped.splitlines()[0].strip()[:limit] if stripped else ""
