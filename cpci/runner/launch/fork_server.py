"""multiprocessing's fork server, preloaded once per session, as what forks a world's ranks.

Used where the pytest process cannot be forked itself (another thread runs in it:
`cpci.runner.launch.zygote.unfit_reason`), or before collection is over, so that its preload
(`cpci.runner.launch.preload`) runs beside the parent's collection.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal

from cpci.runner.launch.forked import RankProcess
from cpci.runner.launch.preload import PRELOAD_ENV, PreloadSpec


def _fork_rank_main(world_dir: str, rank: int, env: dict[str, str]) -> None:
    from cpci.runner.launch.fork_rank import main

    main(world_dir, rank, env)


class ForkServer:
    """The session's multiprocessing fork server, started with `spec` preloaded: where the
    pytest process cannot be forked itself (`cpci.runner.launch.zygote.unfit_reason`), or before
    collection is over (it preloads beside it)."""

    def __init__(self, spec: PreloadSpec) -> None:
        self.spec = spec
        self._used = False  # forked a rank (then it stays up: it ends with the session)
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["cpci.runner.launch.preload"])
        from multiprocessing import forkserver

        # The server inherits the environment as it is now: it finds its preload spec there.
        # `ensure_running` returns once the server is spawned: its preload runs beside us.
        previous = os.environ.get(PRELOAD_ENV)
        os.environ[PRELOAD_ENV] = spec.model_dump_json()
        try:
            forkserver.ensure_running()
        finally:
            if previous is None:
                del os.environ[PRELOAD_ENV]
            else:
                os.environ[PRELOAD_ENV] = previous
        pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
        if pid is None:
            raise OSError("multiprocessing's fork server did not start")
        self.pid: int = pid

    def start_rank(self, world_dir: str, rank: int, env: dict[str, str]) -> RankProcess:
        self._used = True
        process = self.context.Process(
            target=_fork_rank_main, args=(world_dir, rank, env), name=f"cpci-rank-{rank}"
        )
        process.start()
        return process

    def describe(self) -> str:
        return f"ranks forked from multiprocessing's fork server (pid {self.pid}, preloaded)"

    def close(self) -> None:
        """End a server that never forked a rank (it may still be preloading, so it is killed
        rather than asked: it reads its stop signal only once its preload is done); one that
        forked ranks ends with the session's process."""
        from multiprocessing import forkserver

        if self._used:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        stop = getattr(forkserver._forkserver, "_stop", None)
        if stop is not None:
            stop()  # reaps it; a later session starts a fresh one
