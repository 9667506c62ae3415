"""A copy of the pytest process, forked once collection is over, that forks each world's ranks.

Once the parent has collected, it has imported torch, pytest, the plugins and every test module:
all a rank needs. The fork server preloads the same in a second interpreter, paying for
`import torch` again (seconds, on the critical path of the first world, on cores the parent's
collection is using). So while the parent is still fit to fork (no other Python thread, CUDA
untouched: `unfit_reason`), before the scheduler's threads and the worlds' stores start, it is
forked once with multiprocessing's `fork` start method. That copy, the zygote, tidies what it
inherited of the parent's session (`_tidy`), then serves requests over a pipe: fork rank R of a
world, again with multiprocessing's `fork`, from a process that runs no other Python thread;
answer its pid, and later its exit code.

The parent's side (`Zygote.start_rank`) hands the fork launcher a `ZygoteRank` with the handle a
multiprocessing process gives (`pid`, `sentinel`, `join()`, `exitcode`), so a world's ranks are
watched, stopped and recorded the same way whichever server forked them. The zygote dies with
the parent (parent-death signal, and the end of the pipe), killing its ranks' trees as it goes;
a zygote that is gone makes the next world's start fail, and the launcher falls back to torchrun.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from cpci.runner.launch.fork_rank import cuda_touched
from cpci.runner.launch.preload import forget_suite_modules
from cpci.runner.launch.processes import die_with_parent, kill_tree

#: How long the zygote gets to end once the parent closes its pipe (then it is killed).
_STOP_GRACE_S = 5.0


def unfit_reason() -> str | None:
    """Why this process must not be forked into a zygote now, or None when it may be.

    Another Python thread may hold a lock (logging's, an import's, a plugin's own) that the copy
    would inherit held forever; CUDA cannot be used in a fork of a process that initialised it
    or loaded its driver.
    Native threads that torch starts at import are not counted: the fork server forks beside
    them too."""
    others = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    if others:
        return f"the pytest process runs other threads ({', '.join(others)})"
    if threading.current_thread() is not threading.main_thread():
        return "cpci is not on the pytest process's main thread"
    why = cuda_touched()
    return None if why is None else f"{why} in the pytest process"


class ZygoteRank:
    """One rank forked by the zygote, seen from the parent: what a multiprocessing process
    gives its starter (the exit code comes over the zygote's pipe: only a parent can wait)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.exitcode: int | None = None
        self.failed: str | None = None  # why it could not be started
        self._started = threading.Event()
        # Readable (at end of file) once the exit code is known: what `wait()` watches.
        self._read_end, self._write_end = os.pipe()

    @property
    def sentinel(self) -> int:
        return self._read_end

    def join(self) -> None:
        """Wait until the rank's exit code is known (then its sentinel is closed: call once)."""
        multiprocessing.connection.wait([self._read_end])
        os.close(self._read_end)

    def _heard(self, kind: str, value: Any) -> None:
        if kind == "started":
            self.pid = int(value)
        elif kind == "failed":
            self.failed = str(value)
        elif kind == "exited":
            self.exitcode = int(value)
        elif self.exitcode is None:  # "lost": the zygote is gone, and its ranks with it
            self.exitcode = -signal.SIGKILL
            if self.pid is None:
                self.failed = str(value)
        self._started.set()
        if self.exitcode is not None or self.failed is not None:
            with contextlib.suppress(OSError):
                os.close(self._write_end)


class Zygote:
    """The parent's end of its zygote: forked in the constructor, so make it while the process
    is fit to fork (`unfit_reason()` is None)."""

    def __init__(self, *, log: Path, test_files: Iterable[str]) -> None:
        ours, theirs = multiprocessing.Pipe()
        fork = multiprocessing.get_context("fork")
        self._process = fork.Process(
            target=_serve,
            args=(theirs, ours, str(log), sorted(set(test_files))),
            name="cpci-zygote",
        )
        with warnings.catch_warnings():
            # Python 3.12+ warns of forking beside threads: torch's own native one is expected.
            warnings.simplefilter("ignore", DeprecationWarning)
            self._process.start()
        theirs.close()
        assert self._process.pid is not None
        self.pid: int = self._process.pid
        self.log = log
        self._conn = ours
        self._send = threading.Lock()
        self._lock = threading.Lock()
        self._next = 0
        self._ranks: dict[int, ZygoteRank] = {}
        self._gone: str | None = None
        self._reader = threading.Thread(target=self._read, name="cpci-zygote", daemon=True)
        self._reader.start()
        # Before multiprocessing's own exit handler, which waits for its children: ours ends
        # when its pipe does.
        atexit.register(self.close)

    def start_rank(self, world_dir: str, rank: int, env: dict[str, str]) -> ZygoteRank:
        """Fork rank `rank` of the world in `world_dir`; OSError when the zygote cannot."""
        with self._lock:
            if self._gone is not None:
                raise OSError(self._gone)
            key = self._next
            self._next += 1
            handle = self._ranks[key] = ZygoteRank()
        try:
            with self._send:
                self._conn.send((key, world_dir, rank, env))
        except (OSError, ValueError) as exc:
            raise OSError(f"cpci's zygote (pid {self.pid}) is gone ({exc})") from exc
        handle._started.wait()
        if handle.failed is not None:
            raise OSError(handle.failed)
        return handle

    def describe(self) -> str:
        return f"ranks forked from a copy of this pytest process (pid {self.pid})"

    def close(self) -> None:
        """End the zygote (it kills the ranks still running); safe to call twice."""
        with self._send, contextlib.suppress(OSError, ValueError):
            self._conn.send(None)
        self._process.join(_STOP_GRACE_S)
        if self._process.exitcode is None:
            kill_tree(self.pid)
            self._process.join()
        with self._send:
            self._conn.close()
        atexit.unregister(self.close)

    def _read(self) -> None:
        while True:
            try:
                kind, key, value = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                handle = self._ranks.get(key)
                if kind in ("exited", "failed"):
                    self._ranks.pop(key, None)
            if handle is not None:
                handle._heard(kind, value)
        why = f"cpci's zygote (pid {self.pid}) is gone; see {self.log}"
        with self._lock:
            self._gone = why
            left = list(self._ranks.values())
            self._ranks.clear()
        for handle in left:
            handle._heard("lost", why)


def _serve(conn: Connection, parent_end: Connection, log: str, test_files: list[str]) -> None:
    """The zygote's life: fork ranks on request until the parent says stop, or is gone."""
    parent_end.close()  # held here, the parent's end would never read as closed
    _die_with_parent()
    _tidy(Path(log), test_files)
    fork = multiprocessing.get_context("fork")
    live: dict[int, tuple[int, BaseProcess]] = {}
    try:
        while True:
            for ready in multiprocessing.connection.wait([conn, *live]):
                if ready is conn:
                    try:
                        request = conn.recv()
                    except (EOFError, OSError):
                        return
                    if request is None:  # the parent's session is over
                        return
                    key, world_dir, rank, env = request
                    process = fork.Process(
                        target=_rank,
                        args=(conn, world_dir, rank, env),
                        name=f"cpci-rank-{rank}",
                    )
                    try:
                        process.start()
                    except Exception as exc:
                        conn.send(("failed", key, f"cpci's zygote could not fork: {exc!r}"))
                        continue
                    live[process.sentinel] = (key, process)
                    conn.send(("started", key, process.pid))
                else:
                    assert isinstance(ready, int)
                    key, ended = live.pop(ready)
                    ended.join()
                    conn.send(("exited", key, ended.exitcode))
    finally:
        for _key, left in live.values():
            if left.pid is not None:
                kill_tree(left.pid)


def _rank(conn: Connection, world_dir: str, rank: int, env: dict[str, str]) -> None:
    conn.close()  # the zygote's pipe is its own: a rank holding it would hide its end
    from cpci.runner.launch.fork_rank import main

    main(world_dir, rank, env)


def _die_with_parent() -> None:
    die_with_parent()  # not Linux: the end of the pipe still ends the zygote
    if os.getppid() == 1:
        os._exit(1)  # the parent died before the signal was armed


def _tidy(log: Path, test_files: list[str]) -> None:
    """Leave behind what a rank must not inherit of the parent's pytest session.

    - output: the parent's (pytest's capture files, the terminal) becomes the zygote's log;
    - the parent's exit handlers (a rank runs its own at exit, not the parent's cleanups),
      its logging handlers (pytest's, writing to the parent's log file) and its assertion-
      rewriting import hook (a rank's pytest installs its own);
    - the test modules and conftests (a rank's pytest imports them afresh, cheaply: what they
      import stays loaded);
    then freeze what is left out of the cycle collector: every rank's passes skip it, and its
    pages stay shared."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    atexit._clear()
    logging.getLogger().handlers.clear()
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "AssertionRewritingHook"]
    forget_suite_modules(test_files)
    gc.freeze()
