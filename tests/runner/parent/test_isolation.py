"""--cpci-isolate-failures tells broken, order-dependent and flaky configs apart, and names the
polluter of an order-dependent one, bisected among its predecessors in fresh worlds."""

from __future__ import annotations

import pytest

from tests.runner.helpers import results

SUITE = """
import os
import pytest
import torch.distributed as dist

STATE = {"polluted": False}

@pytest.mark.cpci(world_size=2)
def test_a0_clean(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_a1_pollutes(cpci_dist):
    STATE["polluted"] = True  # a module global outlives the config in a shared world

@pytest.mark.cpci(world_size=2)
def test_a2_clean(cpci_dist):
    pass

@pytest.mark.cpci(world_size=2)
def test_b_order_dependent(cpci_dist):
    assert not STATE["polluted"], "polluted by an earlier config"

@pytest.mark.cpci(world_size=2)
def test_c_flaky(cpci_dist):
    marker = os.path.join(os.environ["MARKS"], "flaky-ran")
    first = not os.path.exists(marker)
    dist.barrier()
    if cpci_dist.rank == 0 and first:
        open(marker, "w").close()
    assert not first, "fails on its first run only"

@pytest.mark.cpci(world_size=2)
def test_d_broken(cpci_dist):
    assert False, "always broken"
"""


def test_isolation_classifies_each_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MARKS", str(pytester.mkdir("marks")))
    pytester.makepyfile(test_iso=SUITE)
    # With reruns too, as the Action runs it: the isolating alone run is the first rerun.
    result = pytester.runpytest_subprocess(
        "--cpci-isolate-failures", "--cpci-reruns=2", "--cpci-results=r.jsonl"
    )
    assert result.parseoutcomes() == {"passed": 3, "failed": 2, "flaky": 1}
    final = {}
    for record in results(pytester.path / "r.jsonl"):
        final[record["nodeid"].split("::")[1]] = record
    order = final["test_b_order_dependent"]
    assert (order["isolation"], order["outcome"]) == ("order-dependent", "failed")
    # Failed shared (1), passed alone (2), then 3 replays: after all 3 predecessors (fails),
    # after a0 (passes: the polluter is among a1, a2), after a1 (fails: it is a1).
    assert order["attempt"] == 5
    assert order["order_dependence"] == {
        "polluters": ["test_iso.py::test_a1_pollutes"],
        "replays": 3,
        "searched": 3,
    }
    # Order-dependence is a failure, and the note that says so leads its errors.
    note = order["rank_errors"][0]
    assert (note["rank"], note["phase"]) == (-1, "isolation")
    assert note["message"] == (
        "order-dependent: passes alone, fails after test_iso.py::test_a1_pollutes; found in 3 "
        "replays among 3 predecessors"
    )
    assert "test_iso.py::test_a0_clean\ntest_iso.py::test_a1_pollutes\ntest_iso" in note["detail"]
    assert "polluted by an earlier config" in order["rank_errors"][1]["message"]
    assert order["stop_reason"] == (
        "order-dependent: fails after test_iso.py::test_a1_pollutes; found in 3 replays among 3 "
        "predecessors"
    )
    assert final["test_c_flaky"]["isolation"] == "flaky"
    assert final["test_c_flaky"]["outcome"] == "passed"
    assert final["test_c_flaky"]["flaky"] is True
    broken = final["test_d_broken"]
    assert (broken["isolation"], broken["attempt"]) == ("fails-alone", 3)
    assert broken["rank_errors"][-1]["message"] == "failed 3/3 attempts"
    assert final["test_a1_pollutes"]["isolation"] is None
    # Every attempt is kept: the first failure of the flaky config is not hidden.
    attempts = [
        (r["nodeid"].split("::")[1], r["attempt"], r["outcome"])
        for r in results(pytester.path / "r.jsonl")
    ]
    assert ("test_c_flaky", 1, "failed") in attempts
    assert ("test_b_order_dependent", 2, "passed") in attempts
    assert ("test_b_order_dependent", 4, "passed") in attempts  # the replay after a0
    result.stdout.fnmatch_lines(
        [
            "*ORDER-DEPENDENT: passes alone, fails after test_iso.py::test_a1_pollutes; found in*",
            "*1 flaky (failed, then passed when rerun):*",
            "*test_iso.py::test_c_flaky*",
            "*1 order-dependent*",
            "*test_iso.py::test_b_order_dependent: fails after test_iso.py::test_a1_pollutes; "
            "found in 3 replays among 3 predecessors",
            "FAILED *test_b_order_dependent - order-dependent: passes alone*",
        ]
    )
