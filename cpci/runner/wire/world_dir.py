"""The files of one world's directory, named in one place for the parent, the shim and the ranks.

Standard library only: the shim imports it on every rank's launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WorldDir:
    """Where a world's plan, journals, agreed records, logs, stacks and exit files live."""

    path: Path

    @property
    def plan(self) -> Path:
        """The `WorldPlan` the parent writes before launch."""
        return self.path / "plan.json"

    @property
    def feed(self) -> Path:
        """The `FeedMessage` lines the parent appends while the world runs."""
        return self.path / "feed.jsonl"

    @property
    def agreed(self) -> Path:
        """Rank 0's `AgreedRecord` lines, one per config."""
        return self.path / "outcomes.jsonl"

    @property
    def torchrun_log(self) -> Path:
        return self.path / "torchrun.log"

    def journal(self, rank: int) -> Path:
        """The rank's `JournalEvent` lines."""
        return self.path / f"rank-{rank}.journal"

    def log(self, rank: int) -> Path:
        """The rank's stdout and stderr (libraries' banners included)."""
        return self.path / f"rank-{rank}.log"

    def stacks(self, rank: int) -> Path:
        """Every thread's Python stack, written when the parent sends SIGUSR1."""
        return self.path / f"rank-{rank}.stacks"

    def exit(self, rank: int) -> Path:
        """The `RankExit` its shim writes when the rank's process ends."""
        return self.path / f"rank-{rank}.exit"
