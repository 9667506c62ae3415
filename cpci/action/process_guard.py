"""Keeping cpci's own process out of the tests' reach.

The tests run in an environment that holds none of cpci's credentials (`suite_mode`), but a
process may read another's environment (`/proc/PID/environ`) and memory when both belong to one
user, and cpci's process still has its inputs in the one and the OIDC token it got in the other.
Made undumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`), it is out of reach: its `/proc/PID/environ`
and `/proc/PID/mem` are then root's, and no process of the user may attach to it. A child is
dumpable again once it runs a program, so the tests themselves are as they were. Elsewhere this
does nothing. (Standard library only: it runs before anything else is imported.)
"""

from __future__ import annotations

import ctypes

_PR_SET_DUMPABLE = 4


def guard_this_process() -> bool:
    """Make this process undumpable; False where the kernel has no such call."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
