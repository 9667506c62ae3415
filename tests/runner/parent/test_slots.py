"""Worlds that run at once get disjoint devices, named as the runner's own CUDA_VISIBLE_DEVICES
names them, first come first served; a config needing more GPUs than the runner has is skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from cpci.runner.parent.slots import Slots, visible_devices
from tests.runner.helpers import by_nodeid, results, worlds_started


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition not reached within 10 s"
        time.sleep(0.001)


class _Waiter:
    """A world acquiring its devices on its own thread, as a scheduler thread does."""

    def __init__(self, slots: Slots, world_size: int) -> None:
        self.env: dict[str, str] | None = None
        self.release: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, args=(slots, world_size))
        self._thread.start()

    def _run(self, slots: Slots, world_size: int) -> None:
        self.env, self.release = slots.acquire(world_size)

    def join(self) -> dict[str, str]:
        self._thread.join(timeout=10)
        assert self.env is not None
        return self.env


def test_worlds_get_the_runners_own_devices() -> None:
    slots = Slots(visible_devices({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 4), cores=16)
    assert slots.acquire(2)[0] == {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert slots.acquire(2)[0] == {"CUDA_VISIBLE_DEVICES": "6,7"}


def test_uuid_entries_pass_through() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8f1c2b3a, GPU-77aa01ee,MIG-1234"}
    devices = visible_devices(env, 3)
    assert devices == ["GPU-8f1c2b3a", "GPU-77aa01ee", "MIG-1234"]
    assert Slots(devices, cores=4).acquire(2)[0] == {
        "CUDA_VISIBLE_DEVICES": "GPU-8f1c2b3a,GPU-77aa01ee"
    }


def test_visible_devices_counts_like_cuda() -> None:
    assert visible_devices({}, 3) == ["0", "1", "2"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "3,1,2"}, 2) == ["3", "1"]  # as CUDA counts
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}, 0) == []


def test_mixed_worlds_pack_on_8_gpus_first_come_first_served() -> None:
    slots = Slots(visible_devices({}, 8), cores=16)
    a, release_a = slots.acquire(2)
    b, release_b = slots.acquire(4)
    c, release_c = slots.acquire(2)
    assert [a, b, c] == [
        {"CUDA_VISIBLE_DEVICES": "0,1"},
        {"CUDA_VISIBLE_DEVICES": "2,3,4,5"},
        {"CUDA_VISIBLE_DEVICES": "6,7"},
    ]
    four = _Waiter(slots, 4)  # nothing free: waits
    _until(lambda: slots.waiting == 1)
    release_c()  # 2 free: not enough for the 4-GPU world, which stays first in line
    two = _Waiter(slots, 2)  # would fit now, but came later: waits behind the 4-GPU world
    _until(lambda: slots.waiting == 2)
    release_a()  # 4 free: the 4-GPU world goes first
    assert four.join() == {"CUDA_VISIBLE_DEVICES": "0,1,6,7"}
    assert slots.waiting == 1
    release_b()
    assert two.join() == {"CUDA_VISIBLE_DEVICES": "2,3"}


def test_a_world_larger_than_the_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 4 GPUs, 2 are visible"):
        Slots(["0", "1"], cores=8).acquire(4)


def test_cpu_worlds_are_bounded_by_cores_but_big_worlds_still_run() -> None:
    slots = Slots([], cores=2)
    env, release = slots.acquire(4)  # larger than the machine: takes all of it, runs alone
    assert env == {}
    release()
    _, release_1 = slots.acquire(1)
    _, release_2 = slots.acquire(1)
    release_1()
    release_2()


SUITE = """
import os
import pytest

@pytest.mark.cpci(world_size=2)
def test_sees_the_runners_devices(cpci_dist):
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"

@pytest.mark.cpci(world_size=4)
def test_needs_more_gpus_than_the_runner_has(cpci_dist):
    raise AssertionError("never runs")
"""


def test_worlds_are_handed_the_runners_devices_and_too_big_configs_skip(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_devices=SUITE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb,GPU-ccc")
    # Three GPUs by count (no CUDA here); gloo, so the ranks never touch them.
    result = pytester.runpytest_subprocess(
        "--cpci-gpus=3", "--cpci-backend=gloo", "--cpci-results=r.jsonl", "-rs"
    )
    result.assert_outcomes(passed=1, skipped=1)
    assert worlds_started(result.stdout.str()) == 1
    result.stdout.fnmatch_lines(["SKIPPED * needs 4 GPUs (one per rank), this runner has 3 *"])
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    too_big = records["test_devices.py::test_needs_more_gpus_than_the_runner_has"]
    assert (too_big["outcome"], too_big["world_size"]) == ("skipped", 4)
