"""The cache of shard reads: keyed by the set of shard ids, least recently used out first."""

from __future__ import annotations

from cpci.server.crud.cache import ShardReadCache


def test_same_shard_set_in_any_order_is_one_entry_and_others_load() -> None:
    cache = ShardReadCache(size=2)
    loads: list[str] = []

    def load(value: str) -> str:
        loads.append(value)
        return value

    assert cache.get("results", [3, 1], lambda: load("a")) == "a"
    assert cache.get("results", (1, 3), lambda: load("again")) == "a"
    assert cache.get("results", [1, 3, 4], lambda: load("b")) == "b"  # a new upload: a new set
    assert cache.get("durations", [1, 3], lambda: load("c")) == "c"  # another kind of read
    assert loads == ["a", "b", "c"]
    assert cache.get("results", [1, 3], lambda: load("a2")) == "a2"  # evicted (size 2)
    assert cache.get("durations", [1, 3], lambda: load("c2")) == "c"  # still held
