"""What the parent has learnt of a world from the files its ranks write, as they grow.

Each rank's journal (`rank-N.journal`: hello, begin, left, end) and rank 0's agreed outcomes
(`outcomes.jsonl`) are read as they are appended (`cpci.runner.wire.journal.JournalReader`); the
world (`cpci.runner.parent.launched_world`) decides from what is here which config is in flight,
which rank failed it first, and when a world must be ended. An outcomes line the parent cannot
accept is kept as `Refused`, for the world to turn into an `error` of its config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from cpci.runner.wire.journal import JournalReader
from cpci.runner.wire.protocol import (
    AgreedRecord,
    Begin,
    End,
    Hello,
    Left,
    parse_agreed_record,
    parse_journal_event,
)
from cpci.runner.wire.rank_errors import refusal
from cpci.runner.wire.world_dir import WorldDir
from cpci.schema import FAILING_OUTCOMES, RankError


@dataclass(frozen=True)
class Refused:
    """A line of the outcomes file the parent cannot accept (written by a rank 0 of an older
    cpci, or by a test), with the plan index it names, if it names one."""

    index: int | None
    error: RankError


def _agreed_line(line: bytes) -> AgreedRecord | Refused:
    try:
        return parse_agreed_record(line)
    except ValidationError as exc:
        error = refusal(-1, "the ranks' record of this config", exc)
    try:
        index = json.loads(line).get("index")
    except (ValueError, AttributeError):
        index = None
    return Refused(index if type(index) is int else None, error)


class WorldWatch:
    """What the parent has learnt from the world's journals so far."""

    def __init__(self, world_dir: WorldDir, world_size: int) -> None:
        self.agreed = JournalReader(world_dir.agreed, _agreed_line)
        self._journals = {
            r: JournalReader(world_dir.journal(r), parse_journal_event) for r in range(world_size)
        }
        self.finished: set[int] = set()
        self.pids: dict[int, int] = {}
        self.begun: dict[int, float] = {}  # plan index -> first begin time on any rank
        self.current: dict[int, int] = {}  # rank -> plan index it began last
        self.local_end: dict[tuple[int, int], End] = {}  # (rank, plan index) -> its end
        self.left: dict[tuple[int, int], Left] = {}  # (rank, plan index) -> its harness part's end
        self.first_begin: float | None = None

    def update(self) -> None:
        for rank, reader in self._journals.items():
            for event in reader.read_new():
                if isinstance(event, Hello):
                    self.pids[rank] = event.pid
                elif isinstance(event, Begin):
                    self.begun.setdefault(event.index, event.t)
                    self.current[rank] = event.index
                    if self.first_begin is None:
                        self.first_begin = event.t
                elif isinstance(event, End):
                    self.local_end[(rank, event.index)] = event
                elif isinstance(event, Left):
                    self.left[(rank, event.index)] = event

    def failed_at(self, index: int | None) -> dict[int, float]:
        """Rank -> when it failed config `index` itself, for the ranks whose journal says so."""
        out: dict[int, float] = {}
        for (rank, ended), end in self.local_end.items():
            if ended == index and end.outcome in FAILING_OUTCOMES:
                out[rank] = end.failed_t or end.t
        for (rank, ended), left in self.left.items():
            if ended == index and left.errors:
                out[rank] = min(left.t, out.get(rank, left.t))
        return out

    def ends(self, index: int | None) -> dict[int, End]:
        """Rank -> its end of config `index`, for the ranks that finished it themselves."""
        return {rank: end for (rank, ended), end in self.local_end.items() if ended == index}

    def failed_part(self, index: int) -> float | None:
        """When the first rank's part of harness test `index` failed, while another rank's part
        has not ended; None otherwise."""
        parts = [left for (_, ended), left in self.left.items() if ended == index]
        failed = [left.t for left in parts if left.errors]
        return min(failed) if failed and len(parts) < len(self._journals) else None

    def in_flight(self) -> tuple[int, float] | None:
        """The config begun on some rank whose agreed outcome has not arrived (and since when)."""
        pending = [(t, index) for index, t in self.begun.items() if index not in self.finished]
        if not pending:
            return None
        began, index = min(pending)
        return index, began
