"""A ShardCache listener that sequences two loads of one key in a test, with events only."""

from __future__ import annotations

import threading

from cpci.server.crud.shard_cache import CacheEvent


class Sequenced:
    """A listener that lets a test hold the first load of a kind until another request waits
    for it: `waiting` is set when one does (no sleeps: each step waits for the one before)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.loading = threading.Event()
        self.waiting = threading.Event()
        self.events: list[CacheEvent] = []

    def __call__(self, kind: str, event: CacheEvent) -> None:
        if kind != self.kind:
            return
        self.events.append(event)
        if event == "wait":
            self.waiting.set()
        if event == "load" and not self.loading.is_set():
            self.loading.set()
            assert self.waiting.wait(timeout=30), "no second request waited for the first load"
