"""The durations shards balance by: read once, updated as configs are reported, kept at the end.

Every shard of a CI run must balance by the same durations, or the shards drop a config or run one
twice, and each runner's pytest cache differs. So `--cpci-durations` may name a file or the
service's durations URL (`DurationsSource`), read once at the session's start; without it, this
runner's own cache is what there is. Each config's time is recorded as it is reported, and the
session's end keeps them where they came from: in the cache, or in a file the runner keeps itself
(a plain `{node id: seconds}` mapping). A service's `cpci.durations/1` answer, fetched or saved to
a file, is left as it was. The file format is `cpci.runner.parent.sharding`'s (`load`, `save`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

import pytest

from cpci.runner.options import DurationsSource
from cpci.runner.parent import durations_fetch, sharding

#: Where the durations live in pytest's cache.
CACHE_KEY = "cpci/durations"
#: What a run balanced by, when no durations were given.
FROM_CACHE = "pytest's cache"


class Durations:
    """Seconds per node id, where they came from, and where they are kept at the end."""

    def __init__(
        self,
        seconds: dict[str, float],
        came_from: str = FROM_CACHE,
        *,
        source: DurationsSource | None = None,
        cache: pytest.Cache | None = None,
    ) -> None:
        self.seconds = seconds
        #: What the shard plan names as the durations' origin: the file, the URL or the cache.
        self.came_from = came_from
        self._source = source
        self._cache = cache
        self._recorded: dict[str, float] = {}

    @classmethod
    def load(
        cls,
        source: DurationsSource | None,
        cache: pytest.Cache | None,
        *,
        warn: Callable[[str], None] | None = None,
    ) -> Durations:
        """The durations every shard of the run balances by: the file or URL given, else this
        runner's own cache (which other runners do not share). A URL that gives nothing is a
        warning (`warn`; stderr by default), not an error: the shard runs, balanced by the cache,
        and the plan hash it uploads lets the report flag the run if its shards disagree. A file
        that is not a durations file is a usage error."""
        if source is not None and source.is_url:
            try:
                fetched = durations_fetch.fetch(source.location)
            except durations_fetch.DurationsUnavailable as exc:
                (warn or _to_stderr)(
                    f"cpci: warning: --cpci-durations: {exc}; balancing shards by pytest's cache "
                    "instead (other shards of this run may plan differently)"
                )
            else:
                return cls(fetched, source.location, source=source, cache=cache)
        elif source is not None:
            try:
                read = sharding.load(source.path)
            except ValueError as exc:
                raise pytest.UsageError(f"--cpci-durations: {exc}") from None
            return cls(read, source.location, source=source, cache=cache)
        cached = dict(cache.get(CACHE_KEY, {})) if cache is not None else {}
        return cls(cached, FROM_CACHE, source=source, cache=cache)

    def record(self, nodeid: str, seconds: float) -> None:
        """A config's (or a plain test's) time in this run: what the next run balances by."""
        self.seconds[nodeid] = seconds
        self._recorded[nodeid] = seconds

    def record_all(self, seconds: Mapping[str, float]) -> None:
        """Times recorded by another process of this run (an xdist worker's)."""
        for nodeid, value in seconds.items():
            self.record(nodeid, value)

    @property
    def recorded(self) -> dict[str, float]:
        """The times recorded in this run, by `record` and `record_all`."""
        return dict(self._recorded)

    def save(self) -> None:
        """Keep the durations: in the file given, when it is the runner's own record; else in
        pytest's cache (when the session has one)."""
        source = self._source
        if source is not None and not source.is_url and sharding.recorded_here(source.path):
            sharding.save(source.path, self.seconds)
        elif self._cache is not None:
            self._cache.set(CACHE_KEY, self.seconds)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
