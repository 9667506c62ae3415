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


#: Run in a child as `nobody` (root, as CI is, may signal any process): init is refused, and
#: is still alive.
AS_ANOTHER_USER = """
import os
if os.geteuid() == 0:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
from cpci.pids import is_alive
try:
    os.kill(1, 0)
except PermissionError:
    print("refused", is_alive(1))
"""


def test_a_process_of_another_user_exists_though_signalling_it_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-c", AS_ANOTHER_USER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "True"]
