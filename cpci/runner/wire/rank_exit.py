"""How a rank's process ended: the `rank-N.exit` file its launcher writes and the parent reads.

torchrun reports rank exit codes only as text on its own stderr, so under torchrun the shim (see
`cpci.runner.launch.shim`) records its child's exit in this file; under the fork launcher the
parent's watcher of the forked ranks does (`cpci.runner.launch.forked.ForkedRanks`). Standard
library only: the shim imports it on every rank's launch.
"""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class RankExit:
    """What the rank's launcher saw when the rank's worker process ended."""

    rank: int
    pid: int
    returncode: int  # negative: killed by that signal
    t: float  # when it ended: the parent orders ranks by when they failed
    signal: str | None = None

    @classmethod
    def of(cls, rank: int, pid: int, returncode: int, t: float) -> RankExit:
        name = signal.Signals(-returncode).name if returncode < 0 else None
        return cls(rank=rank, pid=pid, returncode=returncode, t=t, signal=name)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> RankExit | None:
        """The recorded exit, None when there is none (the rank's launcher was killed)."""
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None


@dataclass(frozen=True)
class HowItEnded:
    """The parent's reading of a rank's exit: one line for people, and what it means."""

    message: str
    t: float | None  # when its launcher saw it end
    stopped: bool = False  # its launcher stopped it because another rank had ended
    recorded: bool = True


def how_it_ended(path: Path) -> HowItEnded:
    """The reading of one `rank-N.exit` file."""
    ended = RankExit.read(path)
    if ended is None:
        return HowItEnded(
            "no exit status recorded (the rank's launcher was killed)", None, False, False
        )
    rank, pid, t = ended.rank, ended.pid, ended.t
    if ended.signal == "SIGTERM":
        message = f"rank {rank} was stopped (SIGTERM) after another rank ended"
        return HowItEnded(message, t, stopped=True)
    if ended.signal is not None:
        return HowItEnded(f"rank {rank} was killed by {ended.signal} (pid {pid})", t)
    return HowItEnded(f"rank {rank} exited with code {ended.returncode} (pid {pid})", t)
