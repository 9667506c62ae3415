"""One group's queue in the pool: what its worlds take, what a dead world gives back, and when
the group gives up.

A world takes configs from the front. When it ends, whatever it was fed but neither finished nor
was blamed for goes back to the front, in order, for the next world of the group. A world that
used up no config (it died or hung before finishing or being blamed for one: a start-up failure)
is fruitless; after more than `max_respawns` fruitless worlds in a row the group gives up.

Not thread-safe on its own: the scheduler holds its lock around every call.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from cpci.runner.parent.planning import Group
from cpci.runner.parent.world import WorldResult

__all__ = ["GroupQueue"]


@dataclass
class GroupQueue:
    """The configs of `group` no world has taken yet (plan indices, front first)."""

    group: Group
    queued: deque[int] = field(default_factory=deque)
    worlds: int = 0  # worlds started for the group: the next one's number (`BatchInfo.world`)
    fruitless: int = 0  # worlds in a row that ended without using up a config
    live: int = 0  # pool worlds of the group running now

    @classmethod
    def of(cls, group: Group) -> GroupQueue:
        return cls(group, deque(range(len(group.configs))))

    def number_world(self) -> int:
        """The number of the world about to start for this group (0, 1, 2... in start order)."""
        self.worlds += 1
        return self.worlds - 1

    def take(self) -> int | None:
        """The next config for a world, or None when the queue is empty."""
        return self.queued.popleft() if self.queued else None

    def world_ended(self, result: WorldResult, max_respawns: int) -> list[int]:
        """Take back what a world did not use up; the configs given up, if the group gives up.

        Every config still queued is given up (and the queue emptied) once more than
        `max_respawns` worlds in a row ended badly without using up a config.
        """
        self.queued.extendleft(reversed(result.unfinished()))
        self.fruitless = 0 if result.progressed else self.fruitless + 1
        if result.failure is None or self.fruitless <= max_respawns:
            return []
        stranded = list(self.queued)
        self.queued.clear()
        return stranded
