"""A rank forked from the session's preloaded interpreter (the fork launcher's entry point).

What forks it (the pytest process's copy, `cpci.runner.launch.zygote`, or the fork server,
`cpci.runner.launch.fork_server`) has torch, pytest, cpci's rank side and the suite's test modules'
imports loaded already; this function, run in the forked child, makes the child look like a rank
torchrun started (its environment, its output in `rank-N.log`, its own session), ties its life to
the pytest process that owns the world, and runs the worker.

Forking is only safe while CUDA is untouched. A rank that finds CUDA initialised in the state it
inherited (a preloaded module used the GPU at import time) exits at once with `UNSAFE_FORK_EXIT`
and says why in its log; the parent then falls back to torchrun for the rest of the session.
"""

from __future__ import annotations

import atexit
import io
import os
import select
import sys
import threading
from pathlib import Path

from cpci.runner.launch.processes import die_with_parent, kill_tree

#: The exit code of a forked rank that refused to run because forking was unsafe (75, EX_TEMPFAIL:
#: the same world would run if started afresh, as torchrun does).
UNSAFE_FORK_EXIT = 75
#: What the refusing rank's line in its log says, before why.
REFUSAL = "refused to run"


#: With this "1", torch's `cuda.is_available()` asks NVML instead of initialising the CUDA driver,
#: so the process stays fit to fork (see `fit_for_forks`).
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def unsafe_fork_reason() -> str | None:
    """Why this forked process must not use torch, or None when it may.

    CUDA cannot be used in a child forked after CUDA was initialised (torch marks such a child
    "in bad fork" and raises on the first CUDA call; an NCCL world would hang instead), nor
    after its driver was merely loaded (`torch.cuda.is_available()` does that).
    """
    why = cuda_touched()
    return None if why is None else f"{why} in the process this rank forked from"


def cuda_touched() -> str | None:
    """What this process (or, in a fork, the process it was forked from) did to CUDA that a
    fork of it cannot use, or None; found without touching CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda._is_in_bad_fork():
        return "torch reports a bad fork: CUDA was initialised"
    # `is_initialized()` is False in a bad fork by design; the flag says what the parent did.
    if getattr(torch.cuda, "_initialized", False):
        return "CUDA was initialised"
    if driver_loaded():
        return (
            f"the CUDA driver was loaded (torch.cuda.is_available() loads it unless {NVML_CHECK}=1)"
        )
    return None


def driver_loaded(maps: str | None = None) -> bool:
    """Whether the CUDA driver library is mapped into this process (`maps`: the text of
    /proc/self/maps, read when not given). Loading it initialises the driver, whose state a
    fork cannot use, though torch's own flags say nothing of it."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return False  # not Linux: torch's flags are all there is
    return any("/libcuda.so" in line for line in maps.splitlines())


def fit_for_forks() -> None:
    """Keep this process's forks able to use CUDA: unless the user chose otherwise, make
    torch's `cuda.is_available()` (a suite's skip marks call it while the parent collects) ask
    NVML, which does not initialise the driver. It answers the same where NVML works, and
    falls back to the driver where it does not (torch's own documented switch)."""
    os.environ.setdefault(NVML_CHECK, "1")


def main(world_dir: str, rank: int, env: dict[str, str]) -> None:
    """Become rank `rank` of the world in `world_dir`, with torchrun's environment `env`."""
    _redirect_output(Path(world_dir) / f"rank-{rank}.log")
    os.setsid()  # like torchrun's ranks: a ^C at the terminal goes to the parent, not to us
    _die_with_owner(int(env["CPCI_OWNER_PID"]))
    why = unsafe_fork_reason()
    if why is not None:
        print(
            f"cpci: rank {rank} {REFUSAL}: {why}; exiting with code {UNSAFE_FORK_EXIT} so "
            "the runner falls back to torchrun",
            file=sys.stderr,
            flush=True,
        )
        os._exit(UNSAFE_FORK_EXIT)
    os.environ.clear()
    os.environ.update(env)
    threads = env.get("OMP_NUM_THREADS")
    if threads and threads.isdigit():
        import torch

        torch.set_num_threads(int(threads))  # torch read the variable before it was set
    from cpci.runner.rank.worker import main as run_worker
    from cpci.runner.wire.world_dir import WorldDir

    try:
        code = run_worker(WorldDir(Path(world_dir)))
    finally:
        # multiprocessing ends its children with os._exit: run what the rank registered to run
        # at exit (coverage data, temp files) as a process torchrun started would.
        atexit._run_exitfuncs()
    sys.exit(code)


def _redirect_output(log: Path) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True, write_through=True)


def _die_with_owner(owner_pid: int) -> None:
    """End this rank (and what it started) when the pytest process that owns it is gone.

    The kernel's parent-death signal covers the fork server (our parent), which exits with its
    owner; a watch on the owner itself also ends the rank's own children first.
    """
    die_with_parent()  # not Linux: the owner watch below still applies
    try:
        owner = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(1)  # gone before we started: nobody is waiting for this rank
    except (AttributeError, OSError):
        return  # no pidfd (old kernel): the parent-death signal still applies

    def watch() -> None:
        select.select([owner], [], [])
        kill_tree(os.getpid())

    threading.Thread(target=watch, name="cpci-owner-watch", daemon=True).start()
