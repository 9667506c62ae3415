"""Shards are deterministic, disjoint, complete, and balanced by recorded durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner import sharding


def test_shards_partition_the_tests() -> None:
    nodeids = [f"t::{i}" for i in range(23)]
    shard_of = sharding.assign(nodeids, {}, 4)
    assert sorted(shard_of) == sorted(nodeids)
    sizes = [list(shard_of.values()).count(s) for s in range(4)]
    assert max(sizes) - min(sizes) <= 1  # by count when nothing is recorded


def test_recorded_durations_balance_the_load() -> None:
    durations = {"slow": 10.0, "a": 3.0, "b": 3.0, "c": 2.0, "d": 2.0}
    shard_of = sharding.assign(list(durations), durations, 2)
    loads = [sum(d for n, d in durations.items() if shard_of[n] == s) for s in range(2)]
    assert sorted(loads) == [10.0, 10.0]


def test_assignment_does_not_depend_on_collection_order() -> None:
    nodeids = [f"t::{i}" for i in range(10)]
    durations = {n: float(i % 3) for i, n in enumerate(nodeids)}
    assert sharding.assign(nodeids, durations, 3) == sharding.assign(
        list(reversed(nodeids)), durations, 3
    )


def test_unknown_tests_weigh_the_median(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    sharding.save(path, {"a": 1.0, "b": 3.0})
    assert sharding.load(path) == {"a": 1.0, "b": 3.0}
    shard_of = sharding.assign(["a", "b", "new"], sharding.load(path), 2)
    assert shard_of["b"] != shard_of["a"]


def test_a_corrupt_durations_file_says_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="delete it to start over"):
        sharding.load(path)


def test_plan_prints_shards_and_batches_and_runs_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(5))
        def test_two(i):
            raise AssertionError("the plan must not run test bodies")
        @pytest.mark.cpci(world_size=4)
        @pytest.mark.parametrize("i", range(3))
        def test_four(i):
            raise AssertionError("the plan must not run test bodies")
        def test_plain():
            pass
        """
    )
    whole = pytester.runpytest_subprocess("--cpci-plan", "--cpci-batch-size=2")
    assert whole.ret == 0
    whole.stdout.fnmatch_lines(
        [
            "cpci plan: 8 config(s) in 5 world(s) (batch size 2, 1 at once)",
            "  batch 0: world_size=2 backend=gloo configs=2",
            "*test_two[[]0[]]",
            "*test_two[[]1[]]",
            "  batch 1: world_size=2 backend=gloo configs=2",
            "*",
            "  batch 3: world_size=4 backend=gloo configs=2",
        ]
    )
    shards = [
        pytester.runpytest_subprocess("--cpci-plan", f"--cpci-shard={i}/2").stdout.str()
        for i in range(2)
    ]
    listed = [{line.strip() for line in out.splitlines() if "::test_" in line} for out in shards]
    assert listed[0].isdisjoint(listed[1])
    assert len(listed[0] | listed[1]) == 8
    assert "cpci plan in shard 0/2" in shards[0]


def test_durations_are_recorded_for_the_next_sharding(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(2))
        def test_x(i, cpci_dist):
            pass
        def test_plain():
            pass
        """
    )
    durations = pytester.path / "durations.json"
    pytester.runpytest_subprocess(f"--cpci-durations={durations}").assert_outcomes(passed=3)
    recorded = sharding.load(durations)
    assert set(recorded) == {
        "test_durations_are_recorded_for_the_next_sharding.py::test_x[0]",
        "test_durations_are_recorded_for_the_next_sharding.py::test_x[1]",
        "test_durations_are_recorded_for_the_next_sharding.py::test_plain",
    }
