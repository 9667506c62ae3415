"""The default process group a world's configs run in, kept alive from config to config.

Tests see a live default process group (`torch.distributed` initialised), as they would under
torchrun. Some tests destroy it and create their own (torch's `MultiProcessTestCase` family does
so per test): `ensure()` before each config brings cpci's back if it is gone or another default
group took its place (which it destroys), on a fresh prefix of the world's store, so one
generation's keys never meet the next's. `release()` destroys it for a test that wants to
initialise its own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from cpci.runner.wire.protocol import Backend

#: The default process group's generations live under this prefix of the world's store.
PREFIX = "cpci/default"


class DefaultGroup:
    """Keeps `torch.distributed`'s default process group of one rank's world."""

    def __init__(
        self, store: Any, *, rank: int, world_size: int, backend: Backend, timeout_s: float
    ) -> None:
        self._store = store
        self._rank = rank
        self._world_size = world_size
        self._backend = backend
        self._timeout = timedelta(seconds=timeout_s)
        self.generation = 0  # how many times it was initialised
        self._group: Any = None  # the default group this keeper made last

    def ensure(self) -> bool:
        """Make cpci's default group live; True when it had to be (re)made.

        Every rank calls it at the same point (before each config), so they agree on the
        generation; it is collective only when a config replaced or destroyed the group, which
        it then did on every rank.
        """
        import torch.distributed as dist

        if dist.is_initialized():
            if dist.group.WORLD is self._group:
                return False
            dist.destroy_process_group()  # a config's own default group, left behind
        self.generation += 1
        prefix = dist.PrefixStore(f"{PREFIX}/{self.generation}", self._store)
        dist.init_process_group(
            self._backend,
            store=prefix,
            rank=self._rank,
            world_size=self._world_size,
            timeout=self._timeout,
        )
        self._group = dist.group.WORLD
        # Connections are made lazily, on first use: make them now, so that a config is not
        # billed for its world's start-up.
        dist.barrier()
        return True

    def release(self) -> None:
        """Destroy the default group if it is live (a test is about to initialise its own)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
