"""Devices for the worlds that run at once: disjoint GPU sets, or a share of the CPU cores.

With GPUs, each world gets its own `CUDA_VISIBLE_DEVICES` and worlds wait until enough GPUs are
free. Without, worlds are bounded by the cores they would busy (a world larger than the machine
still runs, alone).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Slots:
    """Devices for worlds that run at once: GPU indices, or CPU cores when there are no GPUs."""

    def __init__(self, gpus: int, cores: int) -> None:
        self._gpus = list(range(gpus))
        self._free_gpus = list(self._gpus)
        self._cores = max(1, cores)
        self._free_cores = self._cores
        self._cond = threading.Condition()

    def acquire(self, world_size: int) -> tuple[dict[str, str], Callable[[], None]]:
        """Block until the world fits; returns its extra env and the function that frees it."""
        with self._cond:
            if self._gpus:
                if world_size > len(self._gpus):
                    raise ValueError(
                        f"a world of {world_size} ranks needs {world_size} GPUs, "
                        f"{len(self._gpus)} are visible"
                    )
                self._cond.wait_for(lambda: len(self._free_gpus) >= world_size)
                taken = self._free_gpus[:world_size]
                del self._free_gpus[:world_size]
                env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, taken))}
                return env, lambda: self._release(gpus=taken)
            need = min(world_size, self._cores)
            self._cond.wait_for(lambda: self._free_cores >= need)
            self._free_cores -= need
            return {}, lambda: self._release(cores=need)

    def _release(self, gpus: list[int] | None = None, cores: int = 0) -> None:
        with self._cond:
            self._free_gpus.extend(gpus or [])
            self._free_gpus.sort()
            self._free_cores += cores
            self._cond.notify_all()
