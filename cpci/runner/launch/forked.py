"""A world whose ranks were forked from a warm interpreter, as the parent sees it.

What forks them (`RankForker`) is the pytest process's copy (`cpci.runner.launch.zygote`) or
multiprocessing's fork server (`cpci.runner.launch.fork_server`); either hands back a handle per
rank with what a multiprocessing process gives its starter (`RankProcess`). The parent hosts the
world's c10d store, as torchrun's agent does (`TORCHELASTIC_USE_AGENT_STORE`), on a port the
kernel picked: no free-port race. A watcher thread records each rank's exit (`rank-N.exit`) and,
as torchrun does, stops the others once one ended abnormally.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from cpci.runner.launch.fork_rank import UNSAFE_FORK_EXIT
from cpci.runner.launch.processes import kill_tree
from cpci.runner.launch.torchrun import torchrun_env
from cpci.runner.wire.rank_exit import RankExit
from cpci.runner.wire.world_dir import WorldDir

#: How long ranks get to end after SIGTERM once another rank ended abnormally (then SIGKILL).
_STOP_GRACE_S = 5.0
#: How long a forked rank may take to join the parent's store (the world's start-up timeout
#: ends a world that does not start long before this).
_STORE_TIMEOUT = timedelta(hours=1)


class RankProcess(Protocol):
    """A forked rank as its starter sees it (a multiprocessing process has all of it)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def sentinel(self) -> int:
        """Readable once the rank has ended."""
        ...

    @property
    def exitcode(self) -> int | None: ...

    def join(self) -> None:
        """Wait for the rank's end (once its sentinel is readable, at once)."""
        ...


class RankForker(Protocol):
    """What forks ranks: the pytest process's zygote (`cpci.runner.launch.zygote`) or the fork
    server (`cpci.runner.launch.fork_server`)."""

    def start_rank(self, world_dir: str, rank: int, env: dict[str, str]) -> RankProcess:
        """Fork rank `rank` of the world in `world_dir` with `env` (an OSError if it cannot)."""
        ...

    def close(self) -> None:
        """At the session's end."""
        ...

    def describe(self) -> str:
        """Where ranks come from, for the run's summary."""
        ...


class ForkedRanks:
    """A world forked by a `RankForker`; a watcher thread records each rank's exit."""

    def __init__(
        self, forker: RankForker, world_dir: WorldDir, world_size: int, env: dict[str, str]
    ) -> None:
        import torch.distributed as dist

        self._dir = world_dir
        self._store = dist.TCPStore(
            "127.0.0.1", 0, None, True, timeout=_STORE_TIMEOUT, wait_for_workers=False
        )
        run_id = uuid.uuid4().hex
        self._processes: list[RankProcess] = []
        self.refused = False  # a rank found forking unsafe
        self._stopping = False
        # Ranks whose exit the watcher recorded. Only the watcher reads exit codes: two threads
        # reading one sentinel could take a rank's code from each other.
        self._ended: set[int] = set()
        try:
            for rank in range(world_size):
                rank_env = {**env, **torchrun_env(rank, world_size, self._store.port, run_id)}
                self._processes.append(forker.start_rank(str(world_dir.path), rank, rank_env))
        except BaseException:
            self._kill_all()
            raise
        self._watcher = threading.Thread(target=self._watch, name="cpci-ranks", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        live = {p.sentinel: (rank, p) for rank, p in enumerate(self._processes)}
        deadline: float | None = None
        while live:
            timeout = None if deadline is None else max(0.0, deadline - time.time())
            ready = multiprocessing.connection.wait(list(live), timeout)
            if not ready and deadline is not None:
                self._kill_all()
                deadline = None
                continue
            for sentinel in ready:
                rank, process = live.pop(sentinel)  # type: ignore[arg-type]
                process.join()
                code = process.exitcode
                assert process.pid is not None
                assert code is not None
                RankExit.of(rank, process.pid, code, time.time()).write(self._dir.exit(rank))
                self._ended.add(rank)
                if code == UNSAFE_FORK_EXIT:
                    self.refused = True
                if code != 0 and deadline is None and not self._stopping:
                    # As torchrun does: the others are stopped, SIGTERM first.
                    self._stopping = True
                    deadline = time.time() + _STOP_GRACE_S
                    for _rank, other in live.values():
                        _signal(other, signal.SIGTERM)

    def poll(self) -> bool:
        return not self._watcher.is_alive()

    def kill(self) -> None:
        self._stopping = True
        self._kill_all()
        self._watcher.join()

    def _kill_all(self) -> None:
        for rank, process in enumerate(self._processes):
            if rank not in self._ended and process.pid is not None:
                kill_tree(process.pid)

    def ended(self) -> tuple[str, Path]:
        return "the forked ranks ended", self._dir.log(0)


def _signal(process: RankProcess, sig: signal.Signals) -> None:
    if process.pid is not None:
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            pass
