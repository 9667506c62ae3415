"""Failure messages reduced to a signature, so one cause counted a hundred times reads as one.

Messages differ in what changes from run to run (numbers, addresses, paths, ranks, ports, the
values of a tensor), not in what they say; those parts become placeholders and the first line is
kept. The one function the config page (failures grouped by cause), the verdicts (does a failure
at head look like this config's known flaky failures?) and the runner's rerun decision use, of
the error of the rank that failed first (`culprit_error`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cpci.schema import PEER_LOST, ResultRecord, first_line

MAX_LENGTH = 200

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"tensor\(\[.*?\]\)|tensor\(\[.*$"), "tensor(<values>)"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-f]{12,64}\b"), "<sha>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.+-]+){2,}"), "<path>"),
    (re.compile(r"(?:(?<![\w)\]])[-+])?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
)


def signature(message: str) -> str:
    """The first line of `message` with its run-specific parts replaced by placeholders."""
    text = first_line(message, limit=None)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    text = text.strip()
    return text[:MAX_LENGTH] if text else "(no message)"


def culprit_error(errors: Sequence[Mapping[str, Any]] | None) -> str:
    """The error of the rank that failed first: the first rank's entry of `rank_errors` (the
    runner writes them in journal order), its message and detail, passing over ranks that only
    report a peer's death ("remote process exited": the consequence, whatever the order). The
    world-level entry (rank -1) only speaks when no rank does (a world that never came up)."""
    if not errors:
        return ""
    texts = [
        "\n".join(str(t) for t in (e.get("message"), e.get("detail")) if t)
        for e in errors
        if int(e.get("rank", -1)) >= 0
    ]
    if not texts:
        first = errors[0]
        return "\n".join(str(t) for t in (first.get("message"), first.get("detail")) if t)
    return next((t for t in texts if not PEER_LOST.search(t)), texts[0])


def record_signature(record: ResultRecord) -> str:
    """The signature of a failing record's culprit error ("" when it carries no error text:
    nothing to compare with a config's known failures)."""
    culprit = culprit_error([e.model_dump() for e in record.rank_errors])
    return signature(culprit) if culprit.strip() else ""
