"""Per-shard outcome digests, remembered: the dashboard's trend needs tens of thousands of rows.

A stored shard never changes (a re-upload with other content is refused, a rerun is a new
attempt with new shards), so its digest (outcome counts, failing config ids) can be kept for as
long as the process lives. Each app keeps its own bounded cache; replicas each warm their own.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

from cpci.schema import FAILING_OUTCOMES
from cpci.server.analysis.observations import PASSING_OUTCOMES
from cpci.server.crud.common import chunks
from cpci.server.models import Result, Run, Shard

MAX_SHARDS = 20_000
MAX_KEYS = 256

T = TypeVar("T")


@dataclass(frozen=True)
class ShardDigest:
    outcomes: Counter[str]
    failing: frozenset[int]  # config ids
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


class DigestCache:
    """Shard id -> digest, least recently used dropped first; safe across request threads.

    Also remembers derived values per key at a repository version (`remember`), for work
    like the flakiness of recent failures that only a new upload can change.
    """

    def __init__(self, max_shards: int = MAX_SHARDS) -> None:
        self._max = max_shards
        self._items: OrderedDict[int, ShardDigest] = OrderedDict()
        self._derived: OrderedDict[Hashable, tuple[int, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, key: Hashable, version: int, compute: Callable[[], T]) -> T:
        """`compute()`'s value for `key`, recomputed only when `version` changed."""
        with self._lock:
            known = self._derived.get(key)
        if known is not None and known[0] == version:
            value: T = known[1]
            return value
        value = compute()
        with self._lock:
            self._derived[key] = (version, value)
            self._derived.move_to_end(key)
            while len(self._derived) > MAX_KEYS:
                self._derived.popitem(last=False)
        return value

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
        wanted = sorted(set(shard_ids))
        with self._lock:
            found = {i: self._items[i] for i in wanted if i in self._items}
            for i in found:
                self._items.move_to_end(i)
        missing = [i for i in wanted if i not in found]
        if missing:
            loaded = _load(session, missing)
            found.update(loaded)
            with self._lock:
                self._items.update(loaded)
                while len(self._items) > self._max:
                    self._items.popitem(last=False)
        return found


def _load(session: Session, shard_ids: list[int]) -> dict[int, ShardDigest]:
    outcomes: dict[int, Counter[str]] = {i: Counter() for i in shard_ids}
    failing: dict[int, set[int]] = {i: set() for i in shard_ids}
    flaky: dict[int, set[int]] = {i: set() for i in shard_ids}
    connection = session.connection()
    for chunk in chunks(shard_ids):
        rows = connection.execute(
            sa.select(
                col(Result.shard_id), col(Result.config_id), col(Result.outcome),
                col(Result.flaky),
            ).where(col(Result.shard_id).in_(chunk))
        )  # fmt: skip
        for shard_id, config_id, outcome, was_flaky in rows:
            outcomes[shard_id][outcome] += 1
            if outcome in FAILING_OUTCOMES:
                failing[shard_id].add(config_id)
            if was_flaky:
                flaky[shard_id].add(config_id)
    return {
        i: ShardDigest(outcomes[i], frozenset(failing[i]), frozenset(flaky[i])) for i in shard_ids
    }
