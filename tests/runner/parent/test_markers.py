"""A config's options are the merge of every cpci marker on it, the nearest winning: the
parameter's, the function's, the class's, the module's. A conflict at one level is a planning
error naming the test; `--cpci-plan` shows each config's timeout and which setting gave it."""

from __future__ import annotations

import pytest

from tests.runner.helpers import by_nodeid, results

LEVELS = """
import pytest

pytestmark = pytest.mark.cpci(timeout=40, backend="gloo")


@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize(
    "num_gpus", [2, pytest.param(4, marks=pytest.mark.cpci(timeout=3)), pytest.param(1, id="one")]
)
def test_te_shape(num_gpus):
    raise AssertionError("the plan runs no test body")


@pytest.mark.cpci(timeout=20)
class TestClass:
    @pytest.mark.cpci(2)
    def test_from_the_class(self):
        raise AssertionError("the plan runs no test body")

    @pytest.mark.cpci(timeout=5)  # the top decorator: further from the function
    @pytest.mark.cpci(world_size=2)
    def test_two_on_the_function(self):
        raise AssertionError("the plan runs no test body")
"""


def test_each_option_comes_from_the_nearest_marker_that_sets_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_levels=LEVELS)
    result = pytester.runpytest_subprocess("--cpci-plan")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "cpci plan: 5 config(s) in 3 group(s)*",
            "  group 0: world_size=2 backend=gloo configs=3",
            "    test_levels.py::test_te_shape[[]2[]]  timeout 40 s "
            "(module test_levels.py's cpci marker)",
            "    test_levels.py::TestClass::test_from_the_class  timeout 20 s "
            "(class TestClass's cpci marker)",
            "    test_levels.py::TestClass::test_two_on_the_function  timeout 5 s "
            "(test_two_on_the_function's cpci marker)",
            "  group 1: world_size=4 backend=gloo configs=1",
            "    test_levels.py::test_te_shape[[]4[]]  timeout 3 s (the parameter's cpci marker)",
            "  group 2: world_size=1 backend=gloo configs=1",
        ]
    )
    result.stdout.fnmatch_lines(
        ["    test_levels.py::test_te_shape[[]one[]]  timeout 40 s (module test_levels.py's*"]
    )


def test_the_session_timeout_is_named_where_no_marker_sets_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_levels=LEVELS.replace("timeout=40, ", ""))
    pytester.makeini("[pytest]\ncpci_timeout = 30\n")
    from_ini = pytester.runpytest_subprocess("--cpci-plan", "-k", "te_shape and 2")
    from_ini.stdout.fnmatch_lines(
        ["*test_te_shape[[]2[]]  timeout 30 s (ini key cpci_timeout in *)"]
    )
    flag = pytester.runpytest_subprocess("--cpci-plan", "--cpci-timeout=12", "-k", "te_shape and 2")
    flag.stdout.fnmatch_lines(["*test_te_shape[[]2[]]  timeout 12 s (--cpci-timeout)"])


def test_two_values_for_one_option_at_one_level_are_a_planning_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_conflict="""
        import pytest

        @pytest.mark.cpci(world_size=2, timeout=5)
        @pytest.mark.cpci(timeout=9)
        def test_torn(cpci_dist):
            pass

        @pytest.mark.parametrize(
            "n", [pytest.param(1, marks=[pytest.mark.cpci(world_size=2), pytest.mark.cpci(4)])]
        )
        def test_torn_param(n):
            pass

        @pytest.mark.cpci(world_size=2)
        def test_fine(cpci_dist):
            pass
        """
    )
    plan = pytester.runpytest_subprocess("--cpci-plan")
    plan.stdout.fnmatch_lines(
        [
            "cpci plan: 1 config(s)*",
            "  not runnable: test_conflict.py::test_torn: cpci markers of test_torn conflict: "
            "test_torn's cpci marker sets timeout=9 and timeout=5; keep one of them",
            "  not runnable: test_conflict.py::test_torn_param[[]1[]]: cpci markers of "
            "test_torn_param[[]1[]] conflict: the parameter's cpci marker sets world_size=2 and "
            "world_size=4; keep one of them",
        ]
    )
    # What is not runnable fails alone when run, as any config that cannot be planned does
    # (`test_session.py`, `test_world_size_parameter.py`).


HARNESS = """
import pytest
from torch.testing._internal.common_distributed import MultiProcessTestCase

pytestmark = pytest.mark.cpci(timeout=7)


class TestHarness(MultiProcessTestCase):
    @property
    def world_size(self):
        return 3

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_sized_by_its_class(self):
        pass

    @pytest.mark.cpci(world_size=2, timeout=4)
    def test_sized_by_its_marker(self):
        pass
"""


def test_a_harness_test_merges_its_class_with_its_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_harness=HARNESS)
    result = pytester.runpytest_subprocess("--cpci-plan", "--cpci-testcases=shared")
    result.stdout.fnmatch_lines(
        [
            "  group 0: world_size=3 backend=gloo configs=1",
            "    test_harness.py::TestHarness::test_sized_by_its_class  timeout 7 s "
            "(module test_harness.py's cpci marker)",
            "  group 1: world_size=2 backend=gloo configs=1",
            "    test_harness.py::TestHarness::test_sized_by_its_marker  timeout 4 s "
            "(test_sized_by_its_marker's cpci marker)",
        ]
    )


TE_SHAPE = """
import pytest
import torch.distributed as dist


@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize(
    ("num_gpus", "case"),
    [(2, "before"), pytest.param(2, "hangs", marks=pytest.mark.cpci(timeout=3)), (2, "after")],
)
def test_cp(num_gpus, case, cpci_dist):
    if case == "hangs" and cpci_dist.rank == 0:
        dist.barrier()  # rank 1 never joins
"""


def test_a_parameters_timeout_under_a_function_marker_ends_its_hang(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_te=TE_SHAPE)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl")
    result.assert_outcomes(passed=2, failed=1)
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    hung = records["test_te.py::test_cp[2-hangs]"]
    assert hung["outcome"] == "timeout"
    assert [e["rank"] for e in hung["rank_errors"]] == [0]  # rank 1 passed: no failing rank
    assert hung["rank_errors"][0]["message"] == (
        "config did not finish within 3 s (timeout from the parameter's cpci marker): "
        "rank 0 did not finish it (in barrier)"
    )
    assert "rank 1 finished the config itself (passed)" in hung["rank_errors"][0]["detail"]
    assert records["test_te.py::test_cp[2-after]"]["outcome"] == "passed"
    result.stdout.fnmatch_lines(
        [
            "[[]TIMEOUT[]] config did not finish within 3 s (timeout from the parameter's cpci "
            "marker): rank 0 did not finish it (in barrier)",
            "outcome timeout on rank 0 (world size 2), group 0 (world 0, 3 configs), attempt 1",
        ]
    )
