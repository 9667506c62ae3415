"""The pool for real: a plan shows each group as one queue, and the last worlds end on their own.

Which world runs what (the shared queue, the per-world cap, the requeue after a crash, the
respawn cap, groups by world size) is the scheduler's, proven in process on scripted worlds
(`test_scheduler.py`); a real crash, hang and world start failure are in `test_faults.py`.
"""

from __future__ import annotations

import pytest

from tests.runner.helpers import worlds_started


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
