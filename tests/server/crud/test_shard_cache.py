"""The app's one cache of shard reads: values by set of shard ids and by key at a version,
least recently used out first; the app owns it and the webhook worker shares it. Two misses of
one key at once load it once (threads sequenced by the cache's listener, no sleeps)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from cpci.server import Settings, create_app
from cpci.server.crud.shard_cache import KindCounts, ShardCache
from tests.server.cache_listener import Sequenced


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


def test_two_misses_of_one_key_at_once_load_it_once() -> None:
    heard = Sequenced("head")
    cache = ShardCache(listener=heard)
    loads: list[str] = []

    def load(who: str) -> str:
        loads.append(who)
        return who

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.of_shards, "head", [1, 2], lambda: load("first"))
        assert heard.loading.wait(timeout=30)  # the first is loading (held until a wait)
        second = pool.submit(cache.of_shards, "head", [2, 1], lambda: load("second"))
        assert (first.result(timeout=30), second.result(timeout=30)) == ("first", "first")
    assert loads == ["first"]
    assert heard.events == ["load", "wait", "hit"]  # the waiter found the first's value
    assert cache.counts("head") == KindCounts(hits=1, loads=1, waits=1)


def test_when_the_first_load_raises_the_waiter_loads_again() -> None:
    """The first request's error may be its own (its connection dropped): it gets it, and the
    request that waited loads the value itself rather than failing with another's error."""
    heard = Sequenced("head")
    cache = ShardCache(listener=heard)

    def broken() -> str:
        raise ConnectionError("the first request's connection dropped")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.of_shards, "head", [1], broken)
        assert heard.loading.wait(timeout=30)
        second = pool.submit(cache.of_shards, "head", [1], lambda: "loaded again")
        with pytest.raises(ConnectionError, match="dropped"):
            first.result(timeout=30)
        assert second.result(timeout=30) == "loaded again"
    assert heard.events == ["load", "wait", "load"]
    assert cache.counts("head") == KindCounts(hits=0, loads=2, waits=1)
    assert cache.of_shards("head", [1], broken) == "loaded again"  # kept: no third load


def test_variants_of_a_kind_are_kept_apart_and_counted_together() -> None:
    cache = ShardCache()
    assert cache.of_shards("head", [1], lambda: "strict", variant=0.9) == "strict"
    assert cache.of_shards("head", [1], lambda: "loose", variant=0.5) == "loose"
    assert cache.of_shards("head", [1], lambda: "again", variant=0.9) == "strict"
    assert cache.counts("head") == KindCounts(hits=1, loads=2, waits=0)
