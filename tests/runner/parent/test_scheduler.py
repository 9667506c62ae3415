"""Planning errors stay with their config; several worlds at once; progress while waiting; one
final record per config; a scheduler error costs only the configs it could not run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cpci.runner.parent.attempt_records import Delivery, Where, of_not_run
from cpci.runner.parent.launched_world import WorldLaunch
from cpci.runner.parent.planning import ConfigSpec, Group
from cpci.runner.parent.progress import RunStats
from cpci.runner.parent.rerun_policy import RerunPolicy
from cpci.runner.parent.scheduler import Scheduler
from cpci.runner.parent.slots import Slots
from cpci.schema import BatchInfo
from tests.runner.helpers import by_nodeid, results, worlds_started


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
            "*cpci marker of test_bad_argument got unknown argument(s) [[]'colour'[]]*",
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


def test_a_config_gets_one_final_record_even_when_it_is_settled_twice(tmp_path: Path) -> None:
    """A scheduler error settles the configs of its world, one of whose reruns may be queued
    still; when that rerun then runs, its records must not reach pytest or the results file."""
    spec = ConfigSpec(nodeid="t.py::test_a", path="t.py", world_size=2, backend="gloo", timeout=9)
    where = Where(attempt=1, backend="gloo", batch=BatchInfo(index=0, world=0, size=1))
    delivered: list[Delivery] = []
    scheduler = Scheduler(
        [Group(index=0, world_size=2, backend="gloo", configs=(spec,))],
        launch=WorldLaunch(
            run_dir=tmp_path, pytest_args=[], invocation_dir=str(tmp_path), start_timeout_s=1
        ),
        slots=Slots([], cores=2),
        workers=1,
        cap=None,
        max_respawns=0,
        policy=RerunPolicy(reruns=1, isolate=False),
        deliver=delivered.append,
        stats=RunStats(total=1),
    )
    first = replace(of_not_run(spec, "boom", "", where), final=False)
    scheduler._send(first)  # a first attempt, to be rerun
    scheduler._give_up(scheduler._queues[0].group, [0], "cpci scheduler error: boom")
    scheduler._send(replace(first, final=True))  # the rerun, late
    assert [d.final for d in delivered] == [False, True]
    assert delivered[1].note == "reruns stopped: cpci scheduler error: boom"


#: A parent-side conftest: delivering the records of `test_c` (those that ran) fails, as a
#: scheduler error would, `FAILS` times (every time when "always"; its `not_run` records too,
#: when "everything").
FAILING_DELIVERY = """
import os

from cpci.runner.parent.session import BatchedSession

FAILS = os.environ["FAILS"]
deliver = BatchedSession._deliver
failures = []


def failing_deliver(self, sent):
    ran = sent.record.outcome != "not_run" or FAILS == "everything"
    if sent.spec.nodeid.endswith("test_c") and ran and (FAILS != "once" or not failures):
        failures.append(sent)
        raise OSError("the results file could not be written")
    deliver(self, sent)


BatchedSession._deliver = failing_deliver
"""

ERROR_SUITE = """
import pytest

@pytest.mark.cpci(world_size=2)
def test_a(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_b(cpci_dist):
    assert False, "a real failure"

@pytest.mark.cpci(world_size=2)
def test_c(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_d(cpci_dist):
    pass
"""


def _run_with_failing_delivery(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fails: str, *args: str
) -> tuple[pytest.RunResult, dict[str, dict[str, object]]]:
    pytester.makeconftest(FAILING_DELIVERY)
    pytester.makepyfile(test_error=ERROR_SUITE)
    monkeypatch.setenv("FAILS", fails)
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", *args)
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    return result, {n.split("::")[1]: r for n, r in records.items()}


def test_a_scheduler_error_keeps_what_was_agreed_and_requeues_the_rest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, records = _run_with_failing_delivery(pytester, monkeypatch, "once")
    assert {n: r["outcome"] for n, r in records.items()} == {
        "test_a": "passed",
        "test_b": "failed",  # a real failure stays a failure
        "test_c": "passed",  # its record did not get through: run again in the next world
        "test_d": "passed",
    }
    assert worlds_started(result.stdout.str()) == 2
    assert records["test_c"]["batch"]["world"] == 1  # type: ignore[index]
    result.assert_outcomes(passed=3, failed=1)


def test_only_what_cannot_be_requeued_is_not_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, records = _run_with_failing_delivery(
        pytester, monkeypatch, "always", "--cpci-max-respawns=1"
    )
    assert {n: r["outcome"] for n, r in records.items()} == {
        "test_a": "passed",
        "test_b": "failed",
        "test_c": "not_run",  # its world and the next two could not deliver it: the group gave up
        "test_d": "not_run",
    }
    assert worlds_started(result.stdout.str()) == 3
    message = records["test_d"]["rank_errors"][0]["message"]  # type: ignore[index]
    assert message.startswith("not run: cpci scheduler error: OSError('the results file could")
    assert message.endswith(
        "(2 worlds in a row ended without running a config; --cpci-max-respawns 1: the group "
        "gave up)"
    )


def test_pytest_never_waits_for_a_record_that_cannot_be_delivered(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even the `not_run` record of `test_c` cannot be delivered: the thread settling it ends,
    and pytest reports what it did not get instead of waiting for ever."""
    pytester.makeconftest(FAILING_DELIVERY)
    pytester.makepyfile(test_error=ERROR_SUITE)
    monkeypatch.setenv("FAILS", "everything")
    result = pytester.runpytest_subprocess(
        "--cpci-results=r.jsonl", "--cpci-max-respawns=0", timeout=300
    )
    result.assert_outcomes(passed=1, failed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of test_c _*",
            "not run: cpci's scheduler stopped before this config had a record (OSError: the "
            "results file could not be written)",
            "*_ ERROR at setup of test_d _*",
            "not run: cpci's scheduler stopped before this config had a record*",
        ]
    )
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    assert [records[f"test_error.py::test_{n}"]["outcome"] for n in "cd"] == ["not_run"] * 2
    assert (
        "OSError: the results file" in records["test_error.py::test_c"]["rank_errors"][0]["detail"]
    )
