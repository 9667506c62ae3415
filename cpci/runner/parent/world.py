"""What a world is to the scheduler, and how a world ended.

A world runs the configs its `Take` gives (plan indices of its group), one after another, hands
each agreed outcome to its `OutcomeSink` as it arrives, may be killed from another thread, and
ends with a `WorldResult`: what it was fed, what finished, and a `WorldFailure` when it ended
before running all it was fed. The scheduler starts worlds through the `StartWorld` it is given:
the session's launches real ones (`cpci.runner.parent.launched_world`), a test's scripts them, so
the scheduler's rules are tested in process, without torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.progress import InFlight
from cpci.runner.wire.protocol import AgreedRecord
from cpci.schema import RankError

#: Called with each config's agreed record as it arrives (the rank that failed first leads).
OutcomeSink = Callable[[ConfigSpec, AgreedRecord], None]
#: Gives the world its next config (a plan index of its group), or None: it takes no more.
Take = Callable[[], int | None]


@dataclass
class WorldFailure:
    """Why a world ended before running all its configs: a rank died (`crashed`), the config in
    flight outlasted its timeout (`timeout`), or one rank failed a torch harness test and the
    others stayed inside it (`failed`, as the harness would say)."""

    kind: Literal["crashed", "timeout", "failed"]
    culprit: int | None  # plan index of the config in flight, if any
    culprit_s: float  # how long the config in flight had run
    errors: list[RankError]  # the rank that failed first leads
    reason: str  # one line: why the world ended


@dataclass
class WorldResult:
    """How a world ended: what it was fed, what finished, and why it stopped short if it did."""

    started_s: float | None  # launch to the first config beginning; None if none began
    wall_s: float
    finished: set[int]
    failure: WorldFailure | None
    fed: list[int] = field(default_factory=list)  # plan indices, in feed order

    def unfinished(self) -> list[int]:
        """Configs fed that neither finished nor were blamed: they go back to their queue."""
        culprit = None if self.failure is None else self.failure.culprit
        return [i for i in self.fed if i not in self.finished and i != culprit]

    @property
    def progressed(self) -> bool:
        """Whether the world used up a config: one finished, or one was blamed for its end."""
        blamed = self.failure is not None and self.failure.culprit is not None
        return bool(self.finished) or blamed


class World(Protocol):
    """One world, as the thread that runs it and the scheduler see it."""

    @property
    def fed(self) -> list[int]:
        """The plan indices it was fed so far, in feed order."""
        ...

    @property
    def started_s(self) -> float | None:
        """Launch to its first config beginning, once known."""
        ...

    @property
    def in_flight(self) -> InFlight | None:
        """The config it is running now, for the progress line."""
        ...

    def run(self, on_outcome: OutcomeSink) -> WorldResult:
        """Start it, feed it what `Take` gives, and return once it is over (killed included)."""
        ...

    def kill(self) -> None:
        """End it now (safe to call twice, from any thread, before or while it runs)."""
        ...


class StartWorld(Protocol):
    """Makes the world named `name` for `group`, to be fed by `take`, with `env` (its devices)
    over the session's environment; it starts when run."""

    def __call__(self, name: str, group: Group, take: Take, env: dict[str, str]) -> World: ...
