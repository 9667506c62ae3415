"""The world's c10d store: the one rendezvous every rank of a world shares, however it started.

Under torchrun the store is the agent's; under the fork launcher it is the parent's (see
`cpci.runner.launch.launcher`). Either way the rank reaches it the way
`init_process_group("env://")` does, from MASTER_ADDR/MASTER_PORT, RANK and WORLD_SIZE, so cpci's
control plane and the default process group it keeps (`cpci.runner.rank.control_plane`,
`cpci.runner.rank.default_group`) never depend on a process group that test code may destroy.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def connect(timeout_s: float) -> Any:
    """This rank's client of the world's store (a `torch.distributed.Store`)."""
    import torch.distributed as dist

    store, _rank, _world_size = next(
        dist.rendezvous("env://", timeout=timedelta(seconds=timeout_s))
    )
    store.set_timeout(timedelta(seconds=timeout_s))
    return store
