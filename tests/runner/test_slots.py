"""Worlds that run at once get disjoint devices; a world too big for the machine is refused."""

from __future__ import annotations

import threading

import pytest

from cpci.runner.slots import Slots


def test_gpu_worlds_get_disjoint_device_sets() -> None:
    slots = Slots(gpus=4, cores=16)
    env_a, release_a = slots.acquire(2)
    env_b, release_b = slots.acquire(2)
    assert env_a == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert env_b == {"CUDA_VISIBLE_DEVICES": "2,3"}
    got: list[dict[str, str]] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(2)[0]))
    waiter.start()
    waiter.join(timeout=0.2)
    assert got == []  # no GPUs free: the third world waits
    release_b()
    waiter.join(timeout=10)
    assert got == [{"CUDA_VISIBLE_DEVICES": "2,3"}]
    release_a()


def test_a_world_larger_than_the_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 4 GPUs, 2 are visible"):
        Slots(gpus=2, cores=8).acquire(4)


def test_cpu_worlds_are_bounded_by_cores_but_big_worlds_still_run() -> None:
    slots = Slots(gpus=0, cores=2)
    env, release = slots.acquire(4)  # larger than the machine: takes all of it, runs alone
    assert env == {}
    release()
    _, release_1 = slots.acquire(1)
    _, release_2 = slots.acquire(1)
    release_1()
    release_2()
