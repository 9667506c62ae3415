"""Devices for the worlds that run at once: disjoint GPU sets, or a share of the CPU cores.

With GPUs, each world gets its own `CUDA_VISIBLE_DEVICES`, named as the runner's own
`CUDA_VISIBLE_DEVICES` names them: a runner given `4,5,6,7` hands out `4,5` and `6,7`, never
`0,1`, which belong to another runner on the same machine (UUID entries pass through as they are).
Worlds wait first come, first served, so a 4-GPU world is not starved by 2-GPU worlds that keep
fitting in the gaps. Without GPUs, worlds are bounded by the cores they would busy (a world
larger than the machine still runs, alone).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence


def visible_devices(env: Mapping[str, str], device_count: int) -> list[str]:
    """The GPUs this runner may hand out, by the names its own `CUDA_VISIBLE_DEVICES` gives.

    `device_count` is what CUDA counts (`torch.cuda.device_count()`, or `--cpci-gpus`). Like
    CUDA, only the first `device_count` entries count; unset means devices `0..count-1`.
    """
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(device_count)]
    names = [name.strip() for name in listed.split(",") if name.strip()]
    return names[:device_count]


class Slots:
    """Devices for worlds that run at once: GPU names, or CPU cores when there are no GPUs."""

    def __init__(self, devices: Sequence[str], cores: int) -> None:
        self._devices = list(devices)
        self._free = list(self._devices)
        self._cores = max(1, cores)
        self._free_cores = self._cores
        self._queue: deque[object] = deque()  # waiting worlds, first come first served
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        """Worlds waiting for devices (for progress lines and tests)."""
        with self._cond:
            return len(self._queue)

    def acquire(self, world_size: int) -> tuple[dict[str, str], Callable[[], None]]:
        """Block until the world fits and is first in line; its extra env and its release."""
        if self._devices and world_size > len(self._devices):
            raise ValueError(
                f"a world of {world_size} ranks needs {world_size} GPUs, "
                f"{len(self._devices)} are visible"
            )
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            need = world_size if self._devices else min(world_size, self._cores)
            self._cond.wait_for(lambda: self._queue[0] is ticket and self._fits(need))
            self._queue.popleft()
            self._cond.notify_all()  # the next in line may fit too
            if self._devices:
                taken = self._free[:need]
                del self._free[:need]
                env = {"CUDA_VISIBLE_DEVICES": ",".join(taken)}
                return env, lambda: self._release(devices=taken)
            self._free_cores -= need
            return {}, lambda: self._release(cores=need)

    def _fits(self, need: int) -> bool:
        return len(self._free) >= need if self._devices else self._free_cores >= need

    def _release(self, devices: list[str] | None = None, cores: int = 0) -> None:
        with self._cond:
            self._free.extend(devices or [])
            self._free.sort(key=self._devices.index)
            self._free_cores += cores
            self._cond.notify_all()
