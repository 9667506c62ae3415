"""The session's way of starting worlds: fork their ranks, or start them with torchrun.

`Launcher.start(world_dir, world_size, env)` starts the ranks of one world and returns `Ranks`:
`poll()` says when the world is over (every rank exited, or one exited abnormally and the others
were then stopped, as torchrun does), `kill()` ends the whole process tree of every rank. Either
way each rank's exit is written to `rank-N.exit` (`cpci.runner.wire.rank_exit`), so the world reads
how ranks ended the same way whichever launcher started them.

- `fork` (the default): each rank (`cpci.runner.launch.fork_rank`) is forked, with the environment
  torchrun's agent gives its workers, from an interpreter that has torch, pytest and the suite's
  imports loaded (`cpci.runner.launch.forked`): a copy of the pytest process made once collection
  is over (`cpci.runner.launch.zygote`), or, where that process is not fit to fork (another thread
  runs in it), multiprocessing's fork server, started once per session with them preloaded
  (`cpci.runner.launch.fork_server`).
- `torchrun`: `python -m torch.distributed.run --standalone` with a shim per rank
  (`cpci.runner.launch.torchrun`).

Where forking is unsafe (what forks has CUDA initialised: a rank refuses with
`fork_rank.UNSAFE_FORK_EXIT`) or unavailable, the session falls back to torchrun once, with a
warning that says why, and the world that found out is restarted under torchrun.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

import pytest

from cpci.runner.launch.fork_rank import REFUSAL
from cpci.runner.launch.fork_server import ForkServer
from cpci.runner.launch.forked import ForkedRanks, RankForker
from cpci.runner.launch.preload import PreloadSpec, autoloaded_plugins
from cpci.runner.launch.torchrun import TorchrunRanks
from cpci.runner.launch.zygote import Zygote, unfit_reason
from cpci.runner.options import LauncherName
from cpci.runner.wire.world_dir import WorldDir


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
        self.forker: RankForker | None = None
        self._described = "ranks started by torchrun"
        if name == "fork":
            assert make_forker is not None, "the fork launcher needs something to fork ranks"
            try:
                self.forker = make_forker()
            except (ValueError, OSError) as exc:
                self.fall_back(f"ranks cannot be forked ({exc})")
            else:
                self._described = self.forker.describe()

    @property
    def name(self) -> LauncherName:
        """What starts the next world."""
        return "fork" if self._active_forker() is not None else "torchrun"

    def describe(self) -> str:
        """Where the session's ranks came from, for its summary."""
        if self.fell_back is not None:
            return f"ranks started by torchrun after: {self.fell_back}"
        return self._described

    def start(self, world_dir: WorldDir, world_size: int, env: dict[str, str]) -> Ranks:
        """Start the ranks of one world; `env` is the world's environment (rank vars added)."""
        forker = self._active_forker()
        if forker is not None:
            try:
                ranks = ForkedRanks(forker, world_dir, world_size, env)
            except Exception as exc:  # any failure to fork: torchrun will do
                self.fall_back(f"ranks could not be forked for a world ({exc})")
            else:
                return _FallbackRanks(self, ranks, _WorldStart(world_dir, world_size, env))
        return TorchrunRanks(world_dir, world_size, env)

    def close(self) -> None:
        """At the session's end, once its worlds are over: the forker's end."""
        forker, self.forker = self.forker, None
        if forker is not None:
            forker.close()

    def _active_forker(self) -> RankForker | None:
        """What forks the next world's ranks: none once the session fell back to torchrun."""
        return self.forker if self.fell_back is None else None

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
    (`zygote.unfit_reason`), its own copy forks the ranks, with everything imported already. Else a
    fork server preloads `test_files` (and the conftests of `conftest_dirs`): started as the session
    starts (`cpci.runner.launch.preload_targets`), its preload runs beside collection."""

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
