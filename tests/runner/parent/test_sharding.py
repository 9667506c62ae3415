"""Shards are deterministic, disjoint, complete, and balanced by recorded durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner.parent import sharding
from cpci.schema import ShardPlan


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
            "cpci plan: 8 config(s) in 2 group(s) by world size and backend (a queue each), "
            "up to 1 world(s) at once, at most 2 per world",
            "  group 0: world_size=2 backend=gloo configs=5 (at least 3 worlds)",
            "*test_two[[]0[]]  timeout 300 s (cpci's default)",
            "*test_two[[]1[]]  timeout 300 s (cpci's default)",
            "*",
            "  group 1: world_size=4 backend=gloo configs=3 (at least 2 worlds)",
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


def test_the_plan_hash_changes_with_every_input_and_nothing_else() -> None:
    nodeids = ["a", "b", "c"]
    durations = {"a": 1.0, "b": 2.0}
    base = sharding.plan_hash(nodeids, durations, 2)
    assert sharding.plan_hash(list(reversed(nodeids)), durations, 2) == base  # order: no
    assert sharding.plan_hash(nodeids, {**durations, "elsewhere": 9.0}, 2) == base  # not planned
    assert sharding.plan_hash(nodeids, durations, 3) != base
    assert sharding.plan_hash([*nodeids, "d"], durations, 2) != base
    assert sharding.plan_hash(nodeids, {**durations, "a": 1.5}, 2) != base
    assert sharding.plan_hash(nodeids, {**durations, "c": 1.0}, 2) != base


def test_a_durations_file_may_be_the_services_answer_which_a_run_never_overwrites(
    tmp_path: Path,
) -> None:
    served = tmp_path / "served.json"
    served.write_text(
        '{"schema": "cpci.durations/1", "repository": "acme/attn", "branch": "main", '
        '"runs": 3, "newest_commit": "abc1234", "durations": {"t::a": 2.5}}'
    )
    assert sharding.load(served) == {"t::a": 2.5}
    assert not sharding.recorded_here(served)
    own = tmp_path / "own.json"
    assert sharding.recorded_here(own)  # none yet: the run records one
    sharding.save(own, {"t::a": 1.0})
    assert sharding.recorded_here(own)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"t": "slow"}', "expected node id -> seconds"),
        ('{"t": NaN}', "'t' has no finite duration"),
        ('{"schema": "cpci.durations/1", "durations": {}}', "not a valid cpci.durations/1"),
    ],
)
def test_a_bad_durations_document_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sharding.parse(text)


def test_the_plan_names_its_hash_and_writes_it_beside_the_results(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.parametrize("i", range(4))
        def test_t(i):
            pass
        """
    )
    results = pytester.path / "r.jsonl"
    run = pytester.runpytest_subprocess(
        "--cpci-plan", "--cpci-shard=1/2", f"--cpci-results={results}", "-p", "no:cacheprovider"
    )
    assert run.ret == 0
    module = "test_the_plan_names_its_hash_and_writes_it_beside_the_results.py"
    nodeids = [f"{module}::test_t[{i}]" for i in range(4)]
    expected = sharding.plan_hash(nodeids, {}, 2)
    run.stdout.fnmatch_lines(
        [f"  shard plan {expected[:12]}: 4 node id(s) shared out over 2 shard(s), durations *"]
    )
    plan = ShardPlan.model_validate_json((pytester.path / "r.jsonl.plan.json").read_text())
    assert (plan.shard_index, plan.shard_total, plan.plan_hash, plan.configs) == (1, 2, expected, 4)
