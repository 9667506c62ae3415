"""`INDEX/TOTAL`, the one spelling of "this job's shard" (0-based), parsed in one place.

The runner's `--cpci-shard` and the uploader's `--shard` / `CPCI_SHARD` take the same text; each
adds its flag, its variable and the value given to the message, which says what a good value
looks like.
"""

from __future__ import annotations

import re

_SHARD = re.compile(r"(\d+)/(\d+)")


def parse_shard(text: str) -> tuple[int, int]:
    """(index, total) from `INDEX/TOTAL` with 0 <= INDEX < TOTAL; ValueError otherwise."""
    match = _SHARD.fullmatch(text.strip())
    if not match:
        raise ValueError("must look like INDEX/TOTAL, e.g. 0/4 (INDEX counts from 0)")
    index, total = int(match[1]), int(match[2])
    if total < 1 or index >= total:
        raise ValueError("needs 0 <= INDEX < TOTAL in INDEX/TOTAL")
    return index, total
