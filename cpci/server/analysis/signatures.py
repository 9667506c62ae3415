"""Failure messages reduced to a signature, so one cause counted a hundred times reads as one.

Messages differ in what changes from run to run (numbers, addresses, paths, ranks, ports, the
values of a tensor), not in what they say; those parts become placeholders and the first line is
kept. The one function both the config page (failures grouped by cause) and the verdicts (does a
failure at head look like this config's known flaky failures?) use.
"""

from __future__ import annotations

import re

from cpci.schema import first_line

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
