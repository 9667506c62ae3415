"""Bulk reads with the cyclic garbage collector paused: a cold PR report builds a million tuples.

CPython's collector makes a full pass whenever enough objects have survived its younger passes,
and a full pass walks every tracked object alive. While a report reads a storm's 240,000 rows
(each a tuple, then result views, lists and keys), those passes walk the rows read so far again
and again: measured, over half of a cold 80,000-config report. What a bulk read builds is plain
tuples, lists and dicts of scalars that reference counting frees, with no cycle to find, so the
collector pauses while such a read runs and resumes when the last concurrent one ends (request
threads share the one process-wide collector). A collector its process had switched off stays
off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


class _Pauses:
    """How many bulk reads are running, and whether the collector was on before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._resume = False

    def enter(self) -> None:
        with self._lock:
            if self._running == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._running += 1

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._resume:
                gc.enable()


_PAUSES = _Pauses()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run a bulk read of acyclic rows without the cyclic collector (see the module's doc)."""
    _PAUSES.enter()
    try:
        yield
    finally:
        _PAUSES.leave()
