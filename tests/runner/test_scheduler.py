"""Planning errors stay with their config; several worlds at once; progress while waiting."""

from __future__ import annotations

import pytest

from tests.runner.helpers import worlds_started


def test_a_config_that_cannot_be_planned_fails_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cpci(world_size=0)
        def test_bad_world(cpci_dist):
            pass
        @pytest.mark.cpci(world_size=2, colour="red")
        def test_bad_argument(cpci_dist):
            pass
        @pytest.mark.cpci(world_size=2)
        def test_good(cpci_dist):
            pass
        def test_fixture_outside_a_world(cpci_dist):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines(
        [
            "*cpci_dist needs @pytest.mark.cpci(world_size=N) on the test*",
            "*cpci marker needs world_size=<int >= 1>, got 0*",
            "*cpci marker got unknown argument(s) [[]'colour'[]]*",
        ]
    )


def test_several_worlds_at_once_with_progress_lines(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import time
        import pytest
        import torch.distributed as dist
        @pytest.mark.cpci(world_size=1)
        @pytest.mark.parametrize("i", range(3))
        def test_alone(i, cpci_dist):
            # Work that outlasts several progress intervals, so the line is due while worlds run.
            time.sleep(1.0)
            assert dist.get_world_size() == 1
        """
    )
    result = pytester.runpytest_subprocess(
        "--cpci-workers=2", "--cpci-batch-size=1", "--cpci-progress-interval=0.1"
    )
    result.assert_outcomes(passed=3)
    assert worlds_started(result.stdout.str()) == 3
    result.stdout.fnmatch_lines(
        ["cpci: */3 configs done, 0 failed, * left, elapsed *, ETA *, [12] world(s) running"]
    )
