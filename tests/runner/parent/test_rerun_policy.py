"""Which first attempts are followed by reruns."""

from __future__ import annotations

import pytest

from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.schema import Outcome, ResultRecord

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def _record(outcome: Outcome) -> ResultRecord:
    return ResultRecord(nodeid="t.py::test_a", world_size=2, outcome=outcome, duration_s=0.0)


@pytest.mark.parametrize("outcome", ["failed", "error", "crashed", "timeout"])
def test_failures_of_a_config_that_ran_are_rerun(outcome: Outcome) -> None:
    assert RerunPolicy(reruns=1).wants_rerun(_record(outcome), shared=False)


@pytest.mark.parametrize("outcome", ["passed", "skipped", "xfailed", "xpassed", "not_run"])
def test_passes_and_configs_that_never_ran_are_not(outcome: Outcome) -> None:
    assert not RerunPolicy(reruns=3, isolate=True).wants_rerun(_record(outcome), shared=True)


@pytest.mark.parametrize(
    ("policy", "shared", "alone_runs"),
    [
        (RerunPolicy(), True, 0),
        (RerunPolicy(reruns=2), False, 2),
        (RerunPolicy(isolate=True), True, 1),  # isolating is at least one alone run
        (RerunPolicy(isolate=True), False, 0),  # ... of a config that failed in a shared world
        (RerunPolicy(reruns=2, isolate=True), True, 2),  # the isolating run is the first rerun
    ],
)
def test_alone_runs(policy: RerunPolicy, shared: bool, alone_runs: int) -> None:
    assert policy.alone_runs(shared) == alone_runs
