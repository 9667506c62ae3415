"""How a world's ranks are started: forked from a preloaded interpreter, or by torchrun.

`Launcher.start(world_dir, world_size, env)` starts the ranks of one world and returns `Ranks`:
`poll()` says when the world is over (every rank exited, or one exited abnormally and the others
were then stopped, as torchrun does), `kill()` ends the whole process tree of every rank. Either
way each rank's exit is written to `rank-N.exit` (`cpci.runner.rank_exit`), so the world reads
how ranks ended the same way whichever launcher started them.

- `fork` (the default): each rank (`cpci.runner.fork_rank`) is forked, with the environment
  torchrun's agent gives its workers, from an interpreter that has torch, pytest and the suite's
  imports loaded: a copy of the pytest process made once collection is over
  (`cpci.runner.zygote`), or, where that process is not fit to fork (another thread runs in it),
  multiprocessing's fork server, started once per session with them preloaded
  (`cpci.runner.preload`). The parent hosts the world's c10d store, as torchrun's agent does
  (`TORCHELASTIC_USE_AGENT_STORE`), on a port the kernel picked: no free-port race.
- `torchrun`: `python -m torch.distributed.run --standalone` with `cpci.runner.shim` per rank.

Where forking is unsafe (what forks has CUDA initialised: a rank refuses with
`fork_rank.UNSAFE_FORK_EXIT`) or unavailable, the session falls back to torchrun once, with a
warning that says why, and the world that found out is restarted under torchrun.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Literal, NamedTuple, Protocol, get_args

import pytest

from cpci.runner.fork_rank import REFUSAL, UNSAFE_FORK_EXIT
from cpci.runner.preload import PRELOAD_ENV, PreloadSpec, autoloaded_plugins
from cpci.runner.processes import kill_tree
from cpci.runner.rank_exit import RankExit
from cpci.runner.world_dir import WorldDir
from cpci.runner.zygote import Zygote, unfit_reason

#: What `--cpci-launcher` takes.
LauncherName = Literal["fork", "torchrun"]
LAUNCHER_NAMES: tuple[LauncherName, ...] = get_args(LauncherName)
#: How long ranks get to end after SIGTERM once another rank ended abnormally (then SIGKILL).
_STOP_GRACE_S = 5.0
#: How long a forked rank may take to join the parent's store (the world's start-up timeout
#: ends a world that does not start long before this).
_STORE_TIMEOUT = timedelta(hours=1)


class Ranks(Protocol):
    """The running ranks of one world, however they were started."""

    def poll(self) -> bool:
        """True once the world is over (its ranks' exits are recorded by then)."""
        ...

    def kill(self) -> None:
        """Kill every rank's whole process tree (safe to call twice, from any thread)."""
        ...

    def ended(self) -> tuple[str, Path]:
        """How the launcher itself ended, and its log: for a world whose ranks never ran."""
        ...


class TorchrunRanks:
    """A world under `torch.distributed.run`; each rank's shim records its exit."""

    def __init__(self, world_dir: WorldDir, world_size: int, env: dict[str, str]) -> None:
        self._log = world_dir.torchrun_log
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={world_size}",
            "--max-restarts=0",
            "--monitor-interval=0.05",
            "-m",
            "cpci.runner.shim",
            str(world_dir.path),
        ]
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def poll(self) -> bool:
        return self._proc.poll() is not None

    def kill(self) -> None:
        if self._proc.poll() is None:
            kill_tree(self._proc.pid)
            self._proc.wait()

    def ended(self) -> tuple[str, Path]:
        return f"torchrun exited with code {self._proc.returncode}", self._log


def torchrun_env(rank: int, world_size: int, port: int, run_id: str) -> dict[str, str]:
    """The variables torchrun's agent sets for a worker of a one-node world."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


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
    """What forks ranks: the pytest process's zygote (`cpci.runner.zygote`) or the fork server."""

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


def _fork_rank_main(world_dir: str, rank: int, env: dict[str, str]) -> None:
    from cpci.runner.fork_rank import main

    main(world_dir, rank, env)


def _signal(process: RankProcess, sig: signal.Signals) -> None:
    if process.pid is not None:
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            pass


class ForkServer:
    """The session's multiprocessing fork server, started with `spec` preloaded: where the
    pytest process cannot be forked itself (`cpci.runner.zygote.unfit_reason`), or before
    collection is over (it preloads beside it)."""

    def __init__(self, spec: PreloadSpec) -> None:
        self.spec = spec
        self._used = False  # forked a rank (then it stays up: it ends with the session)
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["cpci.runner.preload"])
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


class _FallbackRanks:
    """Forked ranks that, if they refuse to run, are replaced by torchrun's."""

    def __init__(self, launcher: Launcher, ranks: ForkedRanks, world: _WorldStart) -> None:
        self._launcher = launcher
        self._ranks: Ranks = ranks
        self._world = world
        self._lock = threading.Lock()

    def poll(self) -> bool:
        with self._lock:
            over = self._ranks.poll()
            if over and isinstance(self._ranks, ForkedRanks) and self._ranks.refused:
                logs = [self._world.world_dir.log(r) for r in range(self._world.world_size)]
                said = [
                    line
                    for log in logs
                    if log.exists()
                    for line in log.read_text(errors="replace").splitlines()
                    if REFUSAL in line
                ]
                self._launcher.fall_back(said[0] if said else f"a rank {REFUSAL}")
                for rank in range(self._world.world_size):
                    self._world.world_dir.exit(rank).unlink(missing_ok=True)
                self._ranks = TorchrunRanks(*self._world)
                return False
            return over

    def kill(self) -> None:
        with self._lock:
            self._ranks.kill()

    def ended(self) -> tuple[str, Path]:
        return self._ranks.ended()


class _WorldStart(NamedTuple):
    """What a world was started with: its torchrun replacement is started with the same."""

    world_dir: WorldDir
    world_size: int
    env: dict[str, str]


class Launcher:
    """The session's way of starting worlds (one per pytest session, shared by its worlds)."""

    def __init__(
        self,
        name: LauncherName,
        *,
        make_forker: Callable[[], RankForker] | None = None,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self._on_fallback = on_fallback
        self._lock = threading.Lock()
        self.fell_back: str | None = None  # why the session uses torchrun after all
        #: What forks the ranks (None under torchrun), until the session ends.
        self.server: RankForker | None = None
        self._described = "ranks started by torchrun"
        if name == "fork":
            assert make_forker is not None, "the fork launcher needs something to fork ranks"
            try:
                self.server = make_forker()
            except (ValueError, OSError) as exc:
                self.fall_back(f"ranks cannot be forked ({exc})")
            else:
                self._described = self.server.describe()

    @property
    def name(self) -> LauncherName:
        """What starts the next world."""
        return "fork" if self._forker() is not None else "torchrun"

    def describe(self) -> str:
        """Where the session's ranks came from, for its summary."""
        if self.fell_back is not None:
            return f"ranks started by torchrun after: {self.fell_back}"
        return self._described

    def start(self, world_dir: WorldDir, world_size: int, env: dict[str, str]) -> Ranks:
        """Start the ranks of one world; `env` is the world's environment (rank vars added)."""
        server = self._forker()
        if server is not None:
            try:
                ranks = ForkedRanks(server, world_dir, world_size, env)
            except Exception as exc:  # any failure to fork: torchrun will do
                self.fall_back(f"ranks could not be forked for a world ({exc})")
            else:
                return _FallbackRanks(self, ranks, _WorldStart(world_dir, world_size, env))
        return TorchrunRanks(world_dir, world_size, env)

    def close(self) -> None:
        """At the session's end, once its worlds are over: the forker's end."""
        server, self.server = self.server, None
        if server is not None:
            server.close()

    def _forker(self) -> RankForker | None:
        """What forks the next world's ranks: none once the session fell back to torchrun."""
        return self.server if self.fell_back is None else None

    def fall_back(self, why: str) -> None:
        """Use torchrun for the rest of the session; say why once."""
        with self._lock:
            if self.fell_back is not None:
                return
            self.fell_back = why
        if self._on_fallback is not None:
            self._on_fallback(
                f"--cpci-launcher fork: falling back to torchrun for the rest of the session: {why}"
            )


def for_session(
    config: pytest.Config,
    name: LauncherName,
    test_files: list[str],
    run_dir: Path,
    *,
    conftest_dirs: list[str] | None = None,
    collected: bool = False,
) -> Launcher:
    """The launcher of one pytest session; a fallback is a pytest warning and a progress line.

    Made once collection is over (`collected`): then, where the pytest process is fit to fork
    (`zygote.unfit_reason`), its own copy forks the ranks, with everything imported already.
    Else a fork server preloads `test_files` (and the conftests of `conftest_dirs`): started as
    the session starts (`cpci.runner.preload_targets`), its preload runs beside collection."""

    def warn(message: str) -> None:
        warning = PytestLauncherWarning(message)
        recorded = warnings.WarningMessage(warning, type(warning), __file__, 0)
        # Straight to pytest's warnings summary: raised in a scheduler thread, a warning would
        # land on whichever test the main thread is reporting (or raise, under -W error).
        config.hook.pytest_warning_recorded.call_historic(
            kwargs={"warning_message": recorded, "when": "runtest", "nodeid": "", "location": None}
        )
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"cpci: {message}")

    def make_forker() -> RankForker:
        files = list(dict.fromkeys(test_files))
        if collected and unfit_reason() is None:
            return Zygote(log=run_dir / "zygote.log", test_files=files)
        preload = PreloadSpec(
            files=files,
            dirs=conftest_dirs or [],
            plugins=autoloaded_plugins(config),
            rootdir=str(config.rootpath),
            importmode=str(getattr(config.option, "importmode", None) or "prepend"),
            sys_path=list(sys.path),
            log=str(run_dir / "forkserver.log"),
        )
        return ForkServer(preload)

    return Launcher(name, make_forker=make_forker if name == "fork" else None, on_fallback=warn)


class PytestLauncherWarning(pytest.PytestWarning):
    """The fork launcher could not be used; worlds start with torchrun instead."""
