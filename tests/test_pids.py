"""`cpci.pids.is_alive`: a running process is alive, one that has exited and been reaped is not."""

from __future__ import annotations

import os
import subprocess
import sys

from cpci.pids import is_alive


def test_a_running_process_is_alive_and_a_reaped_one_is_not() -> None:
    assert is_alive(os.getpid())
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    assert is_alive(child.pid)
    child.communicate(b"", timeout=60)
    assert not is_alive(child.pid)


def test_a_process_of_another_user_exists() -> None:
    assert is_alive(1)  # init: signalling it may be refused, but it runs
