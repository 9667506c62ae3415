"""A group's queue: a dead world's unbegun configs go back to the front, in order; only worlds in a
row that used up no config count towards giving up."""

from __future__ import annotations

from cpci.runner.parent.group_queue import GroupQueue
from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.world import WorldFailure, WorldResult

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def _queue(n: int) -> GroupQueue:
    specs = tuple(
        ConfigSpec(f"t.py::test_a[{i}]", "t.py", world_size=2, backend="gloo", timeout=1.0)
        for i in range(n)
    )
    return GroupQueue.of(Group(0, 2, "gloo", specs))


def _ended(fed: list[int], finished: set[int], culprit: int | None) -> WorldResult:
    failure = WorldFailure("crashed", culprit, 0.0, [], "rank 1 exited with code 3")
    return WorldResult(None, 1.0, finished, failure, fed=fed)


def test_a_dead_world_gives_back_what_it_did_not_use_up_at_the_front_in_order() -> None:
    queue = _queue(6)
    fed = [queue.take() for _ in range(4)]
    assert fed == [0, 1, 2, 3]
    # 0 finished, 1 was in flight (blamed), 2 and 3 were fed ahead and never began.
    assert queue.world_ended(_ended([0, 1, 2, 3], {0}, culprit=1), max_respawns=0) == []
    assert list(queue.queued) == [2, 3, 4, 5]
    assert queue.fruitless == 0  # a crash with a culprit used up a config


def test_the_group_gives_up_after_more_than_max_respawns_fruitless_worlds_in_a_row() -> None:
    queue = _queue(3)
    for _ in range(2):  # two worlds that died before their first config ended
        first = queue.take()
        assert first == 0
        assert queue.world_ended(_ended([0], set(), culprit=None), max_respawns=2) == []
    assert queue.fruitless == 2
    queue.take()
    assert queue.world_ended(_ended([0], {0}, culprit=None), max_respawns=2) == []
    assert queue.fruitless == 0  # it ran a config: the count starts again
    for _ in range(2):
        queue.take()
        assert queue.world_ended(_ended([1], set(), culprit=None), max_respawns=2) == []
    queue.take()
    assert queue.world_ended(_ended([1], set(), culprit=None), max_respawns=2) == [1, 2]
    assert queue.take() is None  # given up: nothing more for any world


def test_a_clean_end_never_gives_up_and_worlds_are_numbered_in_start_order() -> None:
    queue = _queue(1)
    assert [queue.number_world() for _ in range(3)] == [0, 1, 2]
    queue.take()
    clean = WorldResult(0.5, 1.0, {0}, None, fed=[0])
    assert queue.world_ended(clean, max_respawns=0) == []
    assert queue.take() is None
