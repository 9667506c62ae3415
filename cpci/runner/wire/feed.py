"""A world's feed: the configs its ranks run, appended by the parent while the world runs.

The parent appends `PlanEntry` lines to the world's `feed.jsonl` (a `cpci.runner.wire.journal` file:
each line durable, never torn) and a `Close` line when the world is to take no more. It keeps a
few entries ahead of the config in flight, so the ranks never wait for it and each rank knows the
config after the one it runs (pytest's `nextitem`, which decides what fixture teardown runs).
Every rank tails the same file, so every rank runs the same configs in the same order.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from cpci.runner.wire.journal import JournalReader, JournalWriter
from cpci.runner.wire.protocol import Close, PlanEntry, parse_feed_message

__all__ = ["LOOKAHEAD", "FeedReader", "FeedWriter"]

#: Entries the parent keeps fed beyond the config in flight: one for the rank's `nextitem`, one
#: so that the next config's `nextitem` is there before the parent hears the current one ended.
LOOKAHEAD = 2
#: How often a rank looks at the feed when the next entry is not there yet.
_POLL_S = 0.005


class FeedWriter:
    """The parent's end: entries in order, then one `Close`."""

    def __init__(self, path: Path) -> None:
        self._journal = JournalWriter(path, truncate=True)
        self.closed = False

    def add(self, entry: PlanEntry) -> None:
        if self.closed:
            raise RuntimeError(f"{self._journal.path} is closed: no entry may follow its Close")
        self._journal.write(entry)

    def close(self) -> None:
        """Write the `Close` line (once) and release the file."""
        if not self.closed:
            self._journal.write(Close())
            self._journal.close()
            self.closed = True


class FeedReader:
    """A rank's end: the entries in order, each with the one after it once that is known."""

    def __init__(self, path: Path) -> None:
        self._reader = JournalReader(path, parse_feed_message)
        self._pending: deque[PlanEntry] = deque()
        self._closed = False

    def next(self) -> tuple[PlanEntry, PlanEntry | None] | None:
        """The next entry and the one after it (None: it is the last); None when the feed closed.

        Waits until both are known, or the feed closed: the parent feeds ahead, so this wait is
        short (it only lasts long if the parent has not yet decided what the world runs next).
        """
        while len(self._pending) < 2 and not self._closed:
            if not self._read():
                time.sleep(_POLL_S)
        if not self._pending:
            return None
        entry = self._pending.popleft()
        return entry, (self._pending[0] if self._pending else None)

    def _read(self) -> bool:
        messages = self._reader.read_new()
        for message in messages:
            if isinstance(message, Close):
                self._closed = True
            elif not self._closed:
                self._pending.append(message)
        return bool(messages)
