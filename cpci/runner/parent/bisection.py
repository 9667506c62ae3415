"""Which predecessor pollutes a config: its predecessors bisected in fresh worlds.

A config that fails in its shared world and passes alone failed because of something a config
before it did (left a process group, a global, a CUDA setting behind). Most order-dependent
tests depend on one other test (Wei et al., TACAS 2021), so naming all n predecessors names
n - 1 innocent ones. This module finds the one: it replays the config after halves of its
predecessors, each replay in a fresh world, keeping their order (the polluter's effect must
come before the victim, and a config that cleans up after it must stay after it).

The replays, for n predecessors, at most ceil(log2 n) + 2 (`replay_bound`):

1. the config after all of them: failing again makes it order-dependent (passing: flaky, done);
2. while more than one candidate is left, after the first half of them: failing keeps that
   half; passing keeps the second half, inferred rather than replayed (one polluter must be
   there), so each halving costs one replay;
3. the config after the last candidate alone, unless the last halving already replayed it:
   failing names it (`single`); passing means no single predecessor explains it (two configs
   that pollute only together, or a flaky victim), and the smallest set that was seen to fail
   is named instead.

A replay that says nothing (its world never ran the config, or the session is ending) and the
time cap (`deadline_s`) end the search early; what was seen to fail so far is the answer. The
search is pure: `replay` runs the worlds (`cpci.runner.parent.attempts` hands it a fresh world),
`clock` tells the time, so it is tested in process and the runner and the benchmark share it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

Item = TypeVar("Item")

#: What one replay of the config after some predecessors showed: it failed again, it passed,
#: or nothing (never ran, the session ended).
ReplaySaw = Literal["failed", "passed", "nothing"]
#: Replays the config after these predecessors (in their order) in one fresh world.
Replay = Callable[[list[Item]], ReplaySaw]


def replay_bound(n: int) -> int:
    """The most replays a search among `n` predecessors makes: ceil(log2 n) + 2 (the full
    replay, one per halving, the last candidate's own); 1 for a single predecessor."""
    if n < 1:
        raise ValueError(f"a bisection needs at least one predecessor, got {n}")
    return 1 if n == 1 else math.ceil(math.log2(n)) + 2


@dataclass(frozen=True)
class Bisection(Generic[Item]):
    """What the search found: `polluters` (None: the full replay passed, so the failure did not
    come back after its predecessors: not order-dependent), `single` (one predecessor alone
    makes it fail), the replays it took and why it ended early, if it did."""

    polluters: list[Item] | None
    single: bool
    replays: int
    searched: int
    stopped: str = ""

    @property
    def order_dependent(self) -> bool:
        return self.polluters is not None


def bisect(
    predecessors: Sequence[Item],
    replay: Replay[Item],
    *,
    deadline_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Bisection[Item]:
    """Search `predecessors` (in the order they ran) for the one after which the config fails,
    with at most `replay_bound(len(predecessors))` replays and no replay started once
    `deadline_s` seconds (by `clock`) have passed since the search began."""
    everyone = list(predecessors)
    n = len(everyone)
    bound = replay_bound(n)
    started = clock()
    replays = 0

    def run(items: list[Item]) -> ReplaySaw:
        nonlocal replays
        replays += 1
        return replay(items)

    def out_of_time() -> str:
        if deadline_s is not None and clock() - started >= deadline_s:
            return f"the bisection's {deadline_s:g} s time cap was reached"
        return ""

    first = run(everyone)
    if first != "failed":
        stopped = "the replay after its predecessors never ran it" if first == "nothing" else ""
        return Bisection(None, False, replays, n, stopped)
    smallest = everyone  # the smallest set the config was seen to fail after
    candidates = everyone
    confirmed = True  # whether `candidates` themselves were seen to fail
    stopped = ""
    while len(candidates) > 1:
        stopped = out_of_time()
        if stopped:
            break
        half = candidates[: len(candidates) // 2]
        saw = run(half)
        if saw == "nothing":
            stopped = "a replay never ran the config"
            break
        if saw == "failed":
            candidates, confirmed = half, True
            smallest = half
        else:
            candidates, confirmed = candidates[len(half) :], False
    if len(candidates) == 1 and not stopped:
        if confirmed:
            return Bisection(candidates, True, replays, n)
        stopped = out_of_time()
        if not stopped and replays < bound:
            saw = run(candidates)
            if saw == "failed":
                return Bisection(candidates, True, replays, n)
            if saw == "nothing":
                stopped = "a replay never ran the config"
    assert replays <= bound, f"{replays} replays among {n} exceed the bound {bound}"
    return Bisection(smallest, len(smallest) == 1, replays, n, stopped)
