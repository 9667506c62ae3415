"""Whether a process id still names a running process, for claims left behind by the dead.

The spool's claims and the runner's rank shim both hold a pid and must tell a live owner from one
that died without cleaning up; signal 0 asks the kernel without touching the process.
"""

from __future__ import annotations

import os


def is_alive(pid: int) -> bool:
    """True while `pid` runs (also under another user: it exists, we may just not signal it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
