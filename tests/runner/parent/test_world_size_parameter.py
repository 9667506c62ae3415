"""`@pytest.mark.cpci(world_size="num_gpus")` takes each config's world size from its parameter."""

from __future__ import annotations

import pytest

from tests.runner.helpers import results, worlds_started

SUITE = """
import pytest
import torch.distributed as dist

@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize("num_gpus", [1, 2])
def test_sized_by_parameter(num_gpus, cpci_dist):
    assert dist.get_world_size() == cpci_dist.world_size == num_gpus

@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize("gpus", [2])
def test_names_a_missing_parameter(gpus, cpci_dist):
    pass

@pytest.mark.cpci(world_size="num_gpus")
def test_not_parametrized(cpci_dist):
    pass

@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize("num_gpus", ["2", 0, True])
def test_not_a_world_size(num_gpus, cpci_dist):
    pass
"""


def test_each_config_gets_the_world_its_parameter_names_and_a_bad_one_fails_alone(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sizes=SUITE)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl")
    result.assert_outcomes(passed=2, errors=5)  # the bad ones fail alone, without a world
    assert worlds_started(result.stdout.str()) == 2  # one of each size
    sizes = {
        r["nodeid"].split("::")[1]: r["world_size"]
        for r in results(pytester.path / "r.jsonl")
        if r["outcome"] == "passed"
    }
    assert sizes == {"test_sized_by_parameter[1]": 1, "test_sized_by_parameter[2]": 2}


def test_a_missing_or_bad_parameter_is_an_error_of_that_config_alone(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sizes=SUITE)
    result = pytester.runpytest_subprocess("--cpci-plan")
    lines = result.stdout.str()
    assert "cpci plan: 2 config(s)" in lines  # test_sized_by_parameter[1] and [2]
    result.stdout.fnmatch_lines(
        [
            "*not runnable: test_sizes.py::test_names_a_missing_parameter[[]2[]]: cpci marker "
            "world_size='num_gpus' names a parameter test_names_a_missing_parameter[[]2[]] does "
            "not have (its parameters: gpus)*",
            "*not runnable: test_sizes.py::test_not_parametrized: cpci marker "
            "world_size='num_gpus' names a parameter test_not_parametrized does not have "
            "(its parameters: none)*",
            "*not runnable: test_sizes.py::test_not_a_world_size[[]2[]]: cpci marker "
            "world_size='num_gpus': parameter num_gpus of test_not_a_world_size[[]2[]] is '2' "
            "(str), a world size must be an int >= 1",
            "*not runnable: test_sizes.py::test_not_a_world_size[[]0[]]: * is 0 (int), *",
            "*not runnable: test_sizes.py::test_not_a_world_size[[]True[]]: * is True (bool), *",
        ]
    )
