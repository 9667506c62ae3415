"""What the service remembers of stored shards: one cache per app, shared by every view.

A stored shard never changes (a re-upload with other content is refused, a rerun is a new
attempt with new shards), so whatever is read from a known set of shards stays true for that set
for as long as the process lives: a new upload makes a new set, never a stale entry. Three kinds
of value are kept, each in its own bounded least-recently-used store:

- a digest per shard (outcome counts, failing config ids): the dashboard's trend sums tens of
  thousands of results this way;
- a value per (kind, set of shard ids), read by `load()` from those shards alone: the PR report's
  baseline (the base run's results, the base branch's timings) is the same for every pull request
  on that base;
- a value per key at a repository version (the newest shard id), for work only a new upload can
  change, like the flakiness of recent failures or a PR's quick verdict.

`create_app` makes one and keeps it on `app.state.shard_cache`; replicas each warm their own.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.observations import PASSING_OUTCOMES
from cpci.server.crud.common import chunks
from cpci.server.models import Result, Run, Shard

#: Shard digests kept: one is a few hundred bytes.
MAX_SHARDS = 20_000
#: Values by shard set kept: one is a few MB for a 10,000-config baseline.
MAX_SHARD_SETS = 16
#: Values by key kept (per repository, branch, pull request).
MAX_KEYS = 256

T = TypeVar("T")
#: What a cache listener hears of a value by shard set.
CacheEvent = Literal["hit", "load", "wait"]
Listener = Callable[[str, CacheEvent], None]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class ShardDigest:
    outcomes: Counter[str]
    failing: frozenset[int]  # config row ids (pks)
    rerun_flaky: frozenset[int]  # failed, then passed on a rerun


@dataclass(frozen=True)
class Tally:
    """Outcomes of several shards together."""

    outcomes: dict[str, int]
    failing: frozenset[int]
    rerun_flaky: frozenset[int]

    @property
    def results(self) -> int:
        return sum(self.outcomes.values())

    @property
    def pass_rate(self) -> float | None:
        return pass_rate(self.outcomes)


def pass_rate(outcomes: dict[str, int]) -> float | None:
    """Passes over passes plus failures; skips say nothing about whether a config works."""
    passes = sum(n for o, n in outcomes.items() if o in PASSING_OUTCOMES)
    failures = sum(n for o, n in outcomes.items() if o in FAILING_OUTCOMES)
    return passes / (passes + failures) if passes + failures else None


def repository_version(*, session: Session, repo_id: int) -> int:
    """The newest shard id of a repository: its results change only when this does."""
    newest = session.exec(
        select(func.max(Shard.id))
        .join(Run, col(Shard.run_id) == Run.id)
        .where(Run.repository_id == repo_id)
    ).one()
    return int(newest or 0)


class _Lru(Generic[K, V]):
    """A bounded mapping, least recently used out first; safe across request threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for `key`, None when none is (so a stored value is never None)."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put_all(self, items: Mapping[K, V]) -> None:
        with self._lock:
            for key, value in items.items():
                self._items[key] = value
                self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


@dataclass
class KindCounts:
    """How often values of one kind were found (`hits`), loaded (`loads`) and waited for while
    another request loaded them (`waits`): what tests and operators read to see a warm path."""

    hits: int = 0
    loads: int = 0
    waits: int = 0


class ShardCache:
    """Digests by shard id, values by set of shard ids, values by key at a repository version.

    Loads of values by shard set are single-flight: a request that misses a key another request
    is loading waits for that load instead of reading the same 160,000 rows beside it (on two
    cores the two would each take twice as long). When the load raises, the waiters do not get
    its exception (it may be the first request's own, like its connection dropping): one of them
    loads again. Digests and values by version load outside the locks; two threads may both load
    the same value, and agree.
    """

    def __init__(
        self,
        max_shards: int = MAX_SHARDS,
        max_shard_sets: int = MAX_SHARD_SETS,
        listener: Listener | None = None,
    ) -> None:
        """`listener(kind, event)` hears each "hit", "load" (before it starts) and "wait" (before
        it waits) of values by shard set, outside the cache's locks: for metrics, and for tests
        that sequence two loads of one key."""
        self._digests: _Lru[int, ShardDigest] = _Lru(max_shards)
        self._shard_sets: _Lru[Hashable, Any] = _Lru(max_shard_sets)
        self._derived: _Lru[Hashable, tuple[int, Any]] = _Lru(MAX_KEYS)
        self._flights: dict[Hashable, threading.Event] = {}  # set when that load is over
        self._counts: dict[str, KindCounts] = {}
        self._lock = threading.Lock()
        self._listener = listener

    @property
    def shard_set_capacity(self) -> int:
        """How many values by shard set are kept: more loads push the least recent out."""
        return self._shard_sets.size

    def counts(self, kind: str) -> KindCounts:
        """A copy of the hit, load and wait counts of values by shard set of `kind`."""
        with self._lock:
            return replace(self._counts.get(kind, KindCounts()))

    def remember(self, key: Hashable, version: int, compute: Callable[[], T]) -> T:
        """`compute()`'s value for `key`, recomputed only when `version` changed."""
        known = self._derived.get(key)
        if known is not None and known[0] == version:
            value: T = known[1]
            return value
        value = compute()
        self._derived.put_all({key: (version, value)})
        return value

    def of_shards(
        self,
        kind: str,
        shard_ids: Iterable[int],
        load: Callable[[], T],
        *,
        variant: Hashable = None,
    ) -> T:
        """The value of `load()`, which must read only the shards `shard_ids` (and must not be
        mutated by callers: it is shared). `variant` tells apart values of one kind computed
        under different settings (a storm policy); it is part of the key, not of the counts."""
        key = (kind, variant, tuple(sorted(shard_ids)))
        while True:
            with self._lock:
                counts = self._counts.setdefault(kind, KindCounts())
                known = self._shard_sets.get(key)
                flight = None if known is not None else self._flights.get(key)
                if known is not None:
                    counts.hits += 1
                elif flight is not None:
                    counts.waits += 1
                else:
                    counts.loads += 1
                    self._flights[key] = threading.Event()
            if known is not None:
                self._hear(kind, "hit")
                found: T = known
                return found
            if flight is None:
                return self._load(kind, key, load)
            self._hear(kind, "wait")
            flight.wait()  # then a hit, or the load failed and this request loads it again

    def _load(self, kind: str, key: Hashable, load: Callable[[], T]) -> T:
        try:
            self._hear(kind, "load")
            value = load()
            self._shard_sets.put_all({key: value})
            return value
        finally:
            with self._lock:
                done = self._flights.pop(key)
            done.set()

    def _hear(self, kind: str, event: CacheEvent) -> None:
        if self._listener is not None:
            self._listener(kind, event)

    def tally(self, *, session: Session, shard_ids: Iterable[int]) -> Tally:
        digests = self.digests(session=session, shard_ids=shard_ids)
        outcomes: Counter[str] = Counter()
        failing: set[int] = set()
        flaky: set[int] = set()
        for digest in digests.values():
            outcomes.update(digest.outcomes)
            failing |= digest.failing
            flaky |= digest.rerun_flaky
        return Tally(dict(sorted(outcomes.items())), frozenset(failing), frozenset(flaky))

    def digests(self, *, session: Session, shard_ids: Iterable[int]) -> dict[int, ShardDigest]:
        found: dict[int, ShardDigest] = {}
        missing = []
        for i in sorted(set(shard_ids)):
            digest = self._digests.get(i)
            if digest is None:
                missing.append(i)
            else:
                found[i] = digest
        if missing:
            loaded = _load(session, missing)
            found.update(loaded)
            self._digests.put_all(loaded)
        return found


def _load(session: Session, shard_ids: list[int]) -> dict[int, ShardDigest]:
    outcomes: dict[int, Counter[str]] = {i: Counter() for i in shard_ids}
    failing: dict[int, set[int]] = {i: set() for i in shard_ids}
    flaky: dict[int, set[int]] = {i: set() for i in shard_ids}
    connection = session.connection()
    for chunk in chunks(shard_ids):
        rows = connection.execute(
            sa.select(
                col(Result.shard_id),
                col(Result.config_id),
                col(Result.outcome),
                col(Result.flaky),
            ).where(col(Result.shard_id).in_(chunk))
        )
        for shard_id, config_pk, outcome, was_flaky in rows:
            outcomes[shard_id][outcome] += 1
            if outcome in FAILING_OUTCOMES:
                failing[shard_id].add(config_pk)
            if was_flaky:
                flaky[shard_id].add(config_pk)
    return {
        i: ShardDigest(outcomes[i], frozenset(failing[i]), frozenset(flaky[i])) for i in shard_ids
    }
