"""The program torchrun starts on each rank: it runs the real worker and records how it ended.

torchrun reports rank exit codes only as text on its own stderr. This shim is tiny (stdlib only,
started once per world), launches the worker as its child with stdout and stderr going to the
rank's log file, and writes the child's exit code or signal to `rank-N.exit`, so the parent can say
"rank 1: killed by SIGSEGV" with the tail of that rank's log. It also ends the worker when the
pytest process that owns the world is gone, so a killed run leaves no orphan behind.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from cpci.pids import is_alive
from cpci.runner.wire.rank_exit import RankExit
from cpci.runner.wire.world_dir import WorldDir


def _wait_child_or_owner(child: subprocess.Popen[bytes], owner_pid: int) -> bool:
    """Block until the child exits (True) or the owning pytest process is gone (False)."""
    try:
        child_fd = os.pidfd_open(child.pid)
        owner_fd = os.pidfd_open(owner_pid)
    except (AttributeError, OSError):  # no pidfd (old kernel): fall back to polling
        while child.poll() is None:
            try:
                child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if not is_alive(owner_pid):
                    return False
        return True
    try:
        while True:
            ready, _, _ = select.select([child_fd, owner_fd], [], [])
            if child_fd in ready:
                return True
            if owner_fd in ready:
                return False
    finally:
        os.close(child_fd)
        os.close(owner_fd)


def main() -> None:
    world_dir = WorldDir(Path(sys.argv[1]))
    rank = int(os.environ["RANK"])
    owner_pid = int(os.environ["CPCI_OWNER_PID"])
    with open(world_dir.log(rank), "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "cpci.runner.rank.worker", str(world_dir.path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def forward(signum: int, _frame: object) -> None:
        # torchrun signals the whole process group, so the child usually has it already.
        if child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    if not _wait_child_or_owner(child, owner_pid):
        child.kill()
    code = child.wait()
    RankExit.of(rank, child.pid, code, time.time()).write(world_dir.exit(rank))
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
