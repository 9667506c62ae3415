"""Finding and killing a process tree, so no rank outlives the world it belonged to."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (Linux /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[int] = []
    frontier = [pid]
    while frontier:
        kids = [k for p in frontier for k in children.get(p, [])]
        out.extend(kids)
        frontier = kids
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and all its descendants, deepest first so none is re-parented and missed."""
    for target in [*reversed(descendants(pid)), pid]:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent exits (Linux; elsewhere nothing:
    callers keep their own watch)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
