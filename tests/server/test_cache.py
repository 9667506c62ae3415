"""The app's one cache of shard reads: values by set of shard ids and by key at a version,
least recently used out first; the app owns it and the webhook worker shares it."""

from __future__ import annotations

from cpci.server import Settings, create_app
from cpci.server.shard_cache import ShardCache


def test_same_shard_set_in_any_order_is_one_entry_and_others_load() -> None:
    cache = ShardCache(max_shard_sets=2)
    loads: list[str] = []

    def load(value: str) -> str:
        loads.append(value)
        return value

    assert cache.of_shards("results", [3, 1], lambda: load("a")) == "a"
    assert cache.of_shards("results", (1, 3), lambda: load("again")) == "a"
    assert cache.of_shards("results", [1, 3, 4], lambda: load("b")) == "b"  # a new upload
    assert cache.of_shards("durations", [1, 3], lambda: load("c")) == "c"  # another kind
    assert loads == ["a", "b", "c"]
    assert cache.of_shards("results", [1, 3], lambda: load("a2")) == "a2"  # evicted (size 2)
    assert cache.of_shards("durations", [1, 3], lambda: load("c2")) == "c"  # still held


def test_a_remembered_value_is_recomputed_only_when_the_version_moves() -> None:
    cache = ShardCache()
    loads: list[str] = []

    def load(value: str) -> str:
        loads.append(value)
        return value

    assert cache.remember(("flaky", 1), 7, lambda: load("v7")) == "v7"
    assert cache.remember(("flaky", 1), 7, lambda: load("again")) == "v7"
    assert cache.remember(("flaky", 1), 8, lambda: load("v8")) == "v8"  # an upload came
    assert cache.remember(("flaky", 2), 8, lambda: load("other")) == "other"
    assert loads == ["v7", "v8", "other"]


def test_each_app_owns_one_cache() -> None:
    settings = Settings(database_url="sqlite://")
    first, second = create_app(settings), create_app(settings)
    assert isinstance(first.state.shard_cache, ShardCache)
    assert first.state.shard_cache is not second.state.shard_cache
