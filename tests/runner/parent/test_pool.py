"""The pool: long-lived worlds fed from one queue per group, replaced when they die.

Every assertion reads where each config ran from its results record (`batch.index` is its group,
`batch.world` the world of that group it ran in), never from timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.runner.helpers import results, run_pytest, worlds_started


def _where(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Test name -> (group, world) it ran in, from the last record of each config."""
    return {r["nodeid"].split("::")[1]: (r["batch"]["index"], r["batch"]["world"]) for r in records}


def test_two_workers_take_from_one_queue_so_a_slow_config_holds_up_only_its_world(
    pytester: pytest.Pytester,
) -> None:
    # test_step[0] waits for the queue's last config: with worlds fed fixed chunks it would wait
    # for ever (and time out); with a shared queue the other world runs everything else.
    pytester.makepyfile(
        """
        import os, time
        import pytest

        @pytest.mark.cpci(world_size=1, timeout=120)
        @pytest.mark.parametrize("i", range(10))
        def test_step(i, cpci_dist):
            if i == 0:
                while not os.path.exists("last-done"):
                    time.sleep(0.01)
            if i == 9:
                open("last-done", "w").close()
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "--cpci-workers=2")
    result.assert_outcomes(passed=10)
    records = results(pytester.path / "r.jsonl")
    where = _where(records)
    slow_world = where["test_step[0]"][1]
    assert where["test_step[9]"][1] != slow_world
    ran_with_slow = [name for name, (_, world) in where.items() if world == slow_world]
    # The slow config's world took it and at most the two entries fed ahead of it.
    assert len(ran_with_slow) <= 3
    assert {group for group, _ in where.values()} == {0}
    assert {r["batch"]["size"] for r in records} == {10}  # the group's configs
    assert worlds_started(result.stdout.str()) == 2


def test_a_crash_with_two_workers_gives_its_unbegun_configs_back_to_the_queue(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import os
        import pytest

        @pytest.mark.cpci(world_size=1)
        @pytest.mark.parametrize("i", range(8))
        def test_step(i, cpci_dist):
            if i == 1:
                print("config 1 dies", flush=True)
                os._exit(9)
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "--cpci-workers=2")
    result.assert_outcomes(passed=7, failed=1)
    records = results(pytester.path / "r.jsonl")
    assert sorted(r["nodeid"].split("::")[1] for r in records) == [
        f"test_step[{i}]" for i in range(8)
    ]  # one record each: nothing lost, nothing run twice
    by_name = {r["nodeid"].split("::")[1]: r for r in records}
    crash = by_name["test_step[1]"]
    assert crash["outcome"] == "crashed"
    assert crash["rank_errors"][0]["message"].startswith("rank 0 exited with code 9")
    assert "config 1 dies" in crash["rank_errors"][0]["detail"]
    dead = crash["batch"]["world"]
    # Whatever the dead world had been fed beyond its culprit ran in another world.
    assert all(r["batch"]["world"] != dead for n, r in by_name.items() if n > "test_step[1]")
    assert "1 crashed:" in result.stdout.str()


def test_the_cap_starts_a_fresh_world_every_n_configs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cpci(world_size=1)
        @pytest.mark.parametrize("i", range(5))
        def test_step(i, cpci_dist):
            pass
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "--cpci-batch-size=2")
    result.assert_outcomes(passed=5)
    where = _where(results(pytester.path / "r.jsonl"))
    assert [where[f"test_step[{i}]"] for i in range(5)] == [(0, 0), (0, 0), (0, 1), (0, 1), (0, 2)]
    assert worlds_started(result.stdout.str()) == 3


def test_mixed_world_sizes_each_group_in_its_own_world(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import torch.distributed as dist

        @pytest.mark.cpci(world_size=1)
        @pytest.mark.parametrize("i", range(3))
        def test_one(i, cpci_dist):
            assert dist.get_world_size() == 1

        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(3))
        def test_two(i, cpci_dist):
            assert dist.get_world_size() == 2
            dist.barrier()
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "--cpci-workers=2")
    result.assert_outcomes(passed=6)
    where = _where(results(pytester.path / "r.jsonl"))
    assert {where[f"test_one[{i}]"] for i in range(3)} == {(0, 0)}
    assert {where[f"test_two[{i}]"] for i in range(3)} == {(1, 0)}
    # The second worker found the queues empty once it got cores: it started no world for nothing.
    assert worlds_started(result.stdout.str()) == 2


def test_crashes_blamed_on_configs_never_use_up_the_respawns(tmp_path: Path) -> None:
    (tmp_path / "test_crashes.py").write_text(
        """
import os
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(4))
def test_step(i, cpci_dist):
    if i < 2 and cpci_dist.rank == 1:
        os._exit(3)
"""
    )
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl", "--cpci-max-respawns=0")
    result.assert_outcomes(passed=2, failed=2)
    records = results(tmp_path / "r.jsonl")
    assert [(r["outcome"], r["batch"]["world"]) for r in records] == [
        ("crashed", 0),
        ("crashed", 1),  # each crash used up a config: a fresh world takes the rest
        ("passed", 2),
        ("passed", 2),
    ]
    assert "rank 1 exited with code 3" in records[0]["rank_errors"][0]["message"]
    assert worlds_started(result.stdout.str()) == 3


def test_a_group_gives_up_after_worlds_in_a_row_fail_to_start(tmp_path: Path) -> None:
    # test_step[1] breaks every later world's start-up, then crashes its own world.
    (tmp_path / "conftest.py").write_text(
        "import os\n"
        "if os.path.exists('broken'):\n"
        "    raise SystemExit('conftest refuses: broken')\n"
    )
    (tmp_path / "test_breaks.py").write_text(
        """
import os
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(4))
def test_step(i, cpci_dist):
    if i == 1:
        if cpci_dist.rank == 0:
            open("broken", "w").close()
        os._exit(3)
"""
    )
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl", "--cpci-max-respawns=1")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    records = results(tmp_path / "r.jsonl")
    assert [(r["nodeid"].split("::")[1], r["outcome"]) for r in records] == [
        ("test_step[0]", "passed"),
        ("test_step[1]", "crashed"),
        ("test_step[2]", "not_run"),  # fed to the crashed world, never begun, then given up
        ("test_step[3]", "not_run"),
    ]
    for record in records[2:]:
        first = record["rank_errors"][0]
        assert (first["rank"], first["phase"]) == (-1, "world")
        assert first["message"].startswith("not run: world start-up failed: rank ")
        assert first["message"].endswith(
            "(2 worlds in a row ended without running a config; "
            "--cpci-max-respawns 1: the group gave up)"
        )
        assert "conftest refuses: broken" in first["detail"]
        assert record["batch"]["world"] == 2  # the last world that tried
    assert worlds_started(result.stdout.str()) == 3  # the first, then 1 + 1 respawn that failed


def test_the_plan_shows_each_group_as_one_queue_with_no_cap(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(40))
        def test_two(i):
            raise AssertionError("the plan must not run test bodies")

        @pytest.mark.cpci(world_size=1)
        def test_one():
            raise AssertionError("the plan must not run test bodies")
        """
    )
    result = pytester.runpytest_subprocess("--cpci-plan", "--cpci-workers=3")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "cpci plan: 41 config(s) in 2 group(s) by world size and backend (a queue each), "
            "up to 3 world(s) at once, no cap on configs per world",
            "  group 0: world_size=2 backend=gloo configs=40",
            "*test_two[[]0[]]  timeout 300 s (cpci's default)",
            "*",
            "  group 1: world_size=1 backend=gloo configs=1",
        ]
    )


def test_the_last_worlds_end_on_their_own_so_their_ranks_exit_handlers_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import atexit, os
        import pytest

        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(2))
        def test_two(i, cpci_dist):
            if i == 1:  # the world's last config: its exit handler runs as the world closes
                atexit.register(open, f"atexit-2-{cpci_dist.rank}", "w")

        @pytest.mark.cpci(world_size=1)
        def test_one(cpci_dist):
            atexit.register(open, "atexit-1-0", "w")
        """
    )
    result = pytester.runpytest_subprocess("--cpci-workers=2")
    result.assert_outcomes(passed=3)
    assert worlds_started(result.stdout.str()) == 2
    written = sorted(p.name for p in pytester.path.glob("atexit-*"))
    assert written == ["atexit-1-0", "atexit-2-0", "atexit-2-1"]
