"""Which torch.distributed collective an exception was raised in, and on which group.

A rank that fails inside a collective because its peer already left (it finished the config and
cpci destroyed the groups it made, or it died) gets gloo's or NCCL's generic text. Said with the
collective and its group's ranks, "rank 0 was still in barrier(group=[0, 1])" tells the reader
which wait went unanswered (`cpci.runner.wire.rank_errors.explain_lost_peers`).
"""

from __future__ import annotations

import os
import re
from types import TracebackType
from typing import Any

_C10D = os.path.join("torch", "distributed", "distributed_c10d.py")
#: A frame of a faulthandler dump: `  File "/.../distributed_c10d.py", line 5356 in barrier`.
_DUMPED_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line \d+ in (?P<name>\w+)$')


def raised_in(tb: TracebackType | None) -> str | None:
    """`barrier(group=[0, 1])` or `all_reduce()` (the default group): the outermost public
    function of `torch.distributed` in the traceback, the one the test called; None when the
    exception was not raised inside one."""
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_code.co_name
        if frame.f_code.co_filename.endswith(_C10D) and not name.startswith("_"):
            return f"{name}({_group(frame.f_locals.get('group'))})"
        tb = tb.tb_next
    return None


def _group(group: Any) -> str:
    """How a collective's `group` argument reads: empty for the default group, else its ranks."""
    if group is None:
        return ""
    import torch.distributed as dist

    try:
        return f"group={dist.get_process_group_ranks(group)}"
    except (RuntimeError, ValueError):  # not a group this rank knows (any more)
        return "group=..."


def waiting_in(stacks: str) -> str | None:
    """`barrier`: the outermost public function of `torch.distributed` a thread of a rank's
    stack dump (faulthandler's, most recent call first) is in; None when no thread is in one."""
    outermost = None
    for line in stacks.splitlines():
        frame = _DUMPED_FRAME.match(line)
        if frame is None or not frame["file"].endswith(_C10D):
            if outermost is not None:
                return outermost  # the frames below it are the caller's
            continue
        if not frame["name"].startswith("_"):
            outermost = frame["name"]
    return outermost
