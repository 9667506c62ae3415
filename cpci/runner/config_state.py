"""Process state reset around each config, so configs sharing a world cannot leak into each other.

Seeds are derived from the node id, so a config sees the same random numbers whether it runs first
in a fresh world or fifteenth in a shared one. Environment variables the config set are undone,
and every process group created during the config is destroyed, even when the config failed.
"""

from __future__ import annotations

import os
import random
import sys
import zlib
from types import TracebackType
from typing import Any, NamedTuple


def seed_for(nodeid: str) -> int:
    """A stable per-config seed (crc32 of the node id)."""
    return zlib.crc32(nodeid.encode())


class _TorchFlags(NamedTuple):
    """The process-wide torch settings a config may change."""

    dtype: Any  # torch.dtype; typed loosely so this module imports without torch
    grad: bool
    deterministic: bool
    threads: int

    @classmethod
    def now(cls) -> _TorchFlags:
        import torch

        return cls(
            dtype=torch.get_default_dtype(),
            grad=torch.is_grad_enabled(),
            deterministic=torch.are_deterministic_algorithms_enabled(),
            threads=torch.get_num_threads(),
        )


class ConfigState:
    """Context manager: seed on entry; restore env, torch flags and groups on exit."""

    def __init__(self, nodeid: str) -> None:
        self._nodeid = nodeid
        self._env: dict[str, str] = {}
        self._torch: _TorchFlags | None = None
        self._groups: set[Any] = set()

    def __enter__(self) -> ConfigState:
        import torch

        self._env = dict(os.environ)
        self._torch = _TorchFlags.now()
        self._groups = set(_live_groups())
        seed = seed_for(self._nodeid)
        random.seed(seed)
        torch.manual_seed(seed)
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed(seed)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import torch
        import torch.distributed as dist

        try:
            for group in set(_live_groups()) - self._groups:
                dist.destroy_process_group(group)
        finally:
            os.environ.clear()
            os.environ.update(self._env)
            # Restore only what changed: the first use_deterministic_algorithms() call alone
            # costs about a second of imports.
            before, now = self._torch, _TorchFlags.now()
            assert before is not None, "__exit__ without __enter__"
            if now.dtype != before.dtype:
                torch.set_default_dtype(before.dtype)
            torch.set_grad_enabled(before.grad)
            if now.deterministic != before.deterministic:
                torch.use_deterministic_algorithms(before.deterministic)
            if now.threads != before.threads:
                torch.set_num_threads(before.threads)
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                torch.cuda.empty_cache()


def _live_groups() -> list[Any]:
    """Every process group but the default one (c10d keeps no public list of them)."""
    import torch.distributed.distributed_c10d as c10d

    default = c10d._get_default_group() if c10d.is_initialized() else None
    return [pg for pg in c10d._world.pg_map if pg is not default]
