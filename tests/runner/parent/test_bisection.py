"""The polluter search, in process: scripted replays stand in for the fresh worlds."""

from __future__ import annotations

import itertools

import pytest

from cpci.runner.parent.bisection import Bisection, ReplaySaw, bisect, replay_bound

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


class Victim:
    """A config that fails after any replay holding all of `polluters` (in any position), and
    passes otherwise; every replay is kept, to count and check them."""

    def __init__(self, *polluters: int, never_runs_at: int | None = None) -> None:
        self.polluters = set(polluters)
        self.never_runs_at = never_runs_at
        self.replays: list[list[int]] = []

    def __call__(self, before: list[int]) -> ReplaySaw:
        self.replays.append(before)
        if self.never_runs_at == len(self.replays):
            return "nothing"
        return "failed" if self.polluters <= set(before) else "passed"


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 64, 100, 256])
def test_every_single_polluter_is_named_within_the_bound(n: int) -> None:
    for polluter in range(n):
        victim = Victim(polluter)
        found = bisect(list(range(n)), victim)
        assert found == Bisection([polluter], True, len(victim.replays), n)
        assert found.replays <= replay_bound(n)


def test_the_bound_is_ceil_log2_plus_two() -> None:
    assert [replay_bound(n) for n in (1, 2, 3, 4, 5, 8, 9, 64, 256)] == [1, 3, 4, 4, 5, 5, 6, 8, 10]
    with pytest.raises(ValueError, match="at least one predecessor"):
        replay_bound(0)


def test_replays_keep_the_predecessors_order() -> None:
    victim = Victim(5)
    bisect(list(range(8)), victim)
    assert victim.replays[0] == list(range(8))
    assert all(r == sorted(r) for r in victim.replays)


def test_a_failure_the_full_replay_does_not_bring_back_is_not_order_dependent() -> None:
    found = bisect(list(range(8)), lambda before: "passed")
    assert not found.order_dependent
    assert (found.replays, found.stopped) == (1, "")


def test_two_polluters_together_are_no_single_one_and_the_smallest_set_seen_is_named() -> None:
    # 2 and 3 pollute only together: the first half [0..3] fails, then [0, 1] passes, so [2, 3]
    # is inferred, [2] is replayed alone and passes.
    victim = Victim(2, 3)
    found = bisect(list(range(8)), victim)
    assert found.polluters == [0, 1, 2, 3]
    assert not found.single
    assert found.replays == len(victim.replays) <= replay_bound(8)
    # Across the halves: nothing smaller than all of them was seen to fail.
    across = bisect(list(range(8)), Victim(0, 7))
    assert across.polluters == list(range(8))
    assert not across.single


def test_every_pair_is_never_called_single_and_its_set_holds_both() -> None:
    for pair in itertools.combinations(range(6), 2):
        found = bisect(list(range(6)), Victim(*pair))
        assert found.polluters is not None, pair
        assert not found.single, pair
        assert set(pair) <= set(found.polluters), pair


def test_a_replay_that_never_ran_ends_the_search_with_what_was_seen() -> None:
    found = bisect(list(range(8)), Victim(6, never_runs_at=3))
    assert found.polluters == list(range(8))
    assert not found.single
    assert found.stopped == "a replay never ran the config"
    first = bisect(list(range(8)), Victim(6, never_runs_at=1))
    assert not first.order_dependent
    assert "never ran" in first.stopped


def test_the_time_cap_starts_no_replay_after_it() -> None:
    ticks = iter(range(100))
    victim = Victim(7)
    found = bisect(list(range(64)), victim, deadline_s=2, clock=lambda: next(ticks))
    # The clock reads 0 at the start, 1 before the first halving, 2 before the second.
    assert len(victim.replays) == 2
    assert found.polluters == list(range(32))
    assert not found.single
    assert found.stopped == "the bisection's 2 s time cap was reached"
