"""NCCL's flight recorder for every world, so a hung collective says which one each rank was in.

Worlds get these variables unless the user set them (theirs win):

- `TORCH_NCCL_ASYNC_ERROR_HANDLING=1`: a failed collective tears the process down instead of
  leaving it blocked;
- `TORCH_NCCL_TRACE_BUFFER_SIZE`: the flight recorder keeps the last collectives of each rank;
- `TORCH_NCCL_DUMP_ON_TIMEOUT=1` and `TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<world dir>/nccl-trace-rank-`:
  on a watchdog timeout each rank writes its record to `nccl-trace-rank-<rank>`;
- `TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<world dir>/nccl-trace-rank-`: each rank listens on
  `nccl-trace-rank-<rank>.pipe`; the parent writes to it when a config times out, so the record is
  dumped before the world is killed (cpci's timeout fires before NCCL's own).

The parent attaches the dumps it finds to the `timeout` record (`collect`).
"""

from __future__ import annotations

import io
import os
import pickle
import pprint
import re
from collections.abc import Mapping
from pathlib import Path

#: File-name stem of each rank's dump (`<stem><rank>`) and trigger pipe (`<stem><rank>.pipe`).
DUMP_STEM = "nccl-trace-rank-"
#: Collectives each rank's flight recorder keeps.
TRACE_BUFFER_SIZE = 2000
#: Characters of one rank's dump attached to its record.
DUMP_CAP = 20_000
_DUMP_NAME = re.compile(re.escape(DUMP_STEM) + r"(\d+)")


def world_env(world_dir: Path, user_env: Mapping[str, str]) -> dict[str, str]:
    """The flight-recorder variables for a world in `world_dir`, minus those the user set."""
    stem = str(world_dir / DUMP_STEM)
    wanted = {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(TRACE_BUFFER_SIZE),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": stem,
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": stem,
    }
    return {name: value for name, value in wanted.items() if name not in user_env}


def request_dumps(world_dir: Path) -> None:
    """Ask every rank listening on a trigger pipe to dump its flight recorder now."""
    for pipe in world_dir.glob(f"{DUMP_STEM}*.pipe"):
        try:
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader (the rank is gone, or not an NCCL world): nothing to ask
            continue
        try:
            os.write(fd, b"1")
        except OSError:
            pass
        finally:
            os.close(fd)


def collect(world_dir: Path) -> dict[int, str]:
    """Rank -> its flight-recorder dump as text (capped), for the dumps in `world_dir`."""
    out: dict[int, str] = {}
    for path in world_dir.iterdir():
        match = _DUMP_NAME.fullmatch(path.name)
        if match is None or not path.is_file():
            continue
        text = _as_text(path.read_bytes())
        if len(text) > DUMP_CAP:
            text = text[:DUMP_CAP] + f"\n... ({len(text) - DUMP_CAP} more characters in {path})"
        out[int(match.group(1))] = text
    return out


def _as_text(data: bytes) -> str:
    """torch writes the record pickled: shown decoded when it is plain data, else as text."""
    try:
        return pprint.pformat(_PlainUnpickler(io.BytesIO(data)).load(), width=100)
    except Exception:
        return data.decode(errors="replace")


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (dicts, lists, strings, numbers): the dump never needs a class."""

    def find_class(self, module: str, name: str) -> type:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")
