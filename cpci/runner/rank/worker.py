"""A rank of a cpci world: join the world's store, then run the configs the parent feeds it.

Started by `cpci.runner.launch.shim` under torchrun, or forked by `cpci.runner.launch.fork_rank`.
Reads `plan.json` and then `feed.jsonl` from the world directory (the channels from the parent:
files, never stdin/stdout), journals to `rank-N.journal`, and on SIGUSR1 dumps every thread's Python
stack to `rank-N.stacks` (the parent asks before it kills a hung world).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from cpci.runner.rank import world_store
from cpci.runner.rank.control_plane import ControlPlane
from cpci.runner.rank.default_group import DefaultGroup
from cpci.runner.rank.dist import DistContext
from cpci.runner.rank.plugin import RankPlugin
from cpci.runner.wire.feed import FeedReader
from cpci.runner.wire.journal import JournalWriter
from cpci.runner.wire.protocol import Done, Hello, Ready, WorldPlan
from cpci.runner.wire.world_dir import WorldDir


def _init_world(world_dir: WorldDir, plan: WorldPlan, journal: JournalWriter) -> RankPlugin:
    """Join the world's store, initialise the default group, and build the rank's plugin."""
    import torch

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if plan.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    store = world_store.connect(plan.pg_timeout_s)
    default_group = DefaultGroup(
        store,
        rank=rank,
        world_size=world_size,
        backend=plan.backend,
        timeout_s=plan.pg_timeout_s,
    )
    default_group.ensure()
    context = DistContext(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        backend=plan.backend,
        device=device,
    )
    agreed_file = JournalWriter(world_dir.agreed) if rank == 0 else None
    control = ControlPlane(store, rank=rank, world_size=world_size, agreed_file=agreed_file)
    return RankPlugin(
        plan=plan,
        feed=FeedReader(world_dir.feed),
        journal=journal,
        context=context,
        control=control,
        default_group=default_group,
    )


def main(world_dir: WorldDir) -> int:
    """Run the world's configs on this rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the env)."""
    rank = int(os.environ["RANK"])
    plan = WorldPlan.model_validate_json(world_dir.plan.read_bytes())
    stacks = open(world_dir.stacks(rank), "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    faulthandler.enable()  # fatal signals (SIGSEGV, SIGABRT, ...) print stacks to the rank log
    journal = JournalWriter(world_dir.journal(rank))
    journal.write(Hello(pid=os.getpid(), t=time.time()))
    plugin = _init_world(world_dir, plan, journal)
    os.chdir(plan.invocation_dir)
    pytest_args = [*plan.pytest_args, *plan.collect]
    journal.write(Ready(t=time.time(), backend=plan.backend))
    pytest.main(pytest_args, plugins=[plugin])
    plugin.default_group.release()
    journal.write(Done(t=time.time()))
    faulthandler.unregister(signal.SIGUSR1)
    stacks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(WorldDir(Path(sys.argv[1]))))
