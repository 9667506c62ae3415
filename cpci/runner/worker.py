"""A rank of a cpci world: initialise the process group once, then run the planned configs.

Started by `cpci.runner.shim` under torchrun. Reads `plan.json` from the world directory (the
channel from the parent: a file, never stdin/stdout), journals to `rank-N.journal`, and on
SIGUSR1 dumps every thread's Python stack to `rank-N.stacks` (the parent asks before it kills a
hung world).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cpci.runner.dist import DistContext
from cpci.runner.journal import JournalWriter
from cpci.runner.protocol import Backend, Done, Hello, Ready, WorldPlan
from cpci.runner.rank_plugin import RankPlugin
from cpci.runner.world_dir import WorldDir


def _init_world(backend: Backend, timeout_s: float) -> tuple[DistContext, Any]:
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    control_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    # Connections are made lazily, on first use: make them now, so that world start-up is not
    # billed to the first config.
    dist.barrier()
    dist.barrier(group=control_group)
    dist.gather_object(
        None, [None] * dist.get_world_size() if dist.get_rank() == 0 else None, group=control_group
    )
    context = DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        backend=backend,
        device=device,
    )
    return context, control_group


def main(world_dir: WorldDir) -> int:
    rank = int(os.environ["RANK"])
    plan = WorldPlan.model_validate_json(world_dir.plan.read_bytes())
    stacks = open(world_dir.stacks(rank), "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    faulthandler.enable()  # fatal signals (SIGSEGV, SIGABRT, ...) print stacks to the rank log
    journal = JournalWriter(world_dir.journal(rank))
    journal.write(Hello(pid=os.getpid(), t=time.time()))
    context, control_group = _init_world(plan.backend, plan.pg_timeout_s)
    agreed_file = JournalWriter(world_dir.agreed) if rank == 0 else None
    plugin = RankPlugin(
        plan=plan,
        journal=journal,
        agreed_file=agreed_file,
        context=context,
        control_group=control_group,
    )
    os.chdir(plan.invocation_dir)
    pytest_args = [*plan.pytest_args, *plan.collect]
    journal.write(Ready(t=time.time(), backend=context.backend))
    pytest.main(pytest_args, plugins=[plugin])

    import torch.distributed as dist

    dist.destroy_process_group()
    journal.write(Done(t=time.time()))
    faulthandler.unregister(signal.SIGUSR1)
    stacks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(WorldDir(Path(sys.argv[1]))))
