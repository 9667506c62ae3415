"""Memoised reads of stored shards, for data many reports share.

A shard's results are written in the shard's own transaction and never change afterwards, so
whatever is read from a known set of shards (by shard id, nothing else) stays true for that set:
the sorted ids are the key, and a new upload makes a new set rather than a stale entry. The PR
report reads its baseline this way: the base run's results and the base branch's timings are the
same for every pull request on that base and every upload to each of them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import Engine
from sqlmodel import Session

T = TypeVar("T")

#: Entries kept per database; one is a few MB for a 10,000-config baseline.
SIZE = 16


class ShardReadCache:
    """A small LRU of values by (kind, shard ids); safe to share between request threads."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, tuple[int, ...]], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, shard_ids: Iterable[int], load: Callable[[], T]) -> T:
        """The value of `load()`, which must read only the shards `shard_ids` (and must not be
        mutated by callers: it is shared)."""
        key = (kind, tuple(sorted(shard_ids)))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                value: T = self._entries[key]
                return value
        value = load()  # outside the lock: two threads may both load, and agree
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


_caches: WeakKeyDictionary[Engine, ShardReadCache] = WeakKeyDictionary()
_caches_lock = threading.Lock()


def shard_cache(session: Session) -> ShardReadCache:
    """The cache of the session's database (one per engine, gone with it)."""
    engine = session.get_bind().engine
    with _caches_lock:
        cache = _caches.get(engine)
        if cache is None:
            cache = _caches[engine] = ShardReadCache()
        return cache
