"""--cpci-isolate-failures tells broken, order-dependent and flaky configs apart."""

from __future__ import annotations

import pytest

from tests.runner.helpers import results

SUITE = """
import os
import pytest
import torch.distributed as dist

STATE = {"polluted": False}

@pytest.mark.cpci(world_size=2)
def test_a_pollutes(cpci_dist):
    STATE["polluted"] = True  # a module global outlives the config in a shared world

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
    result = pytester.runpytest_subprocess("--cpci-isolate-failures", "--cpci-results=r.jsonl")
    assert result.parseoutcomes() == {"passed": 1, "failed": 2, "flaky": 1}
    final = {}
    for record in results(pytester.path / "r.jsonl"):
        final[record["nodeid"].split("::")[1]] = record
    assert final["test_b_order_dependent"]["isolation"] == "order-dependent"
    assert final["test_b_order_dependent"]["outcome"] == "failed"
    assert final["test_b_order_dependent"]["attempt"] == 3
    # Order-dependence is a failure, and the note that says so leads its errors.
    note = final["test_b_order_dependent"]["rank_errors"][0]
    assert (note["rank"], note["phase"]) == (-1, "isolation")
    assert note["message"] == (
        "order-dependent: passes alone, fails after test_iso.py::test_a_pollutes"
    )
    assert final["test_c_flaky"]["isolation"] == "flaky"
    assert final["test_c_flaky"]["outcome"] == "passed"
    assert final["test_c_flaky"]["flaky"] is True
    assert final["test_d_broken"]["isolation"] == "fails-alone"
    assert final["test_d_broken"]["attempt"] == 2
    assert final["test_a_pollutes"]["isolation"] is None
    # Every attempt is kept: the first failure of the flaky config is not hidden.
    attempts = [
        (r["nodeid"].split("::")[1], r["attempt"], r["outcome"])
        for r in results(pytester.path / "r.jsonl")
    ]
    assert ("test_c_flaky", 1, "failed") in attempts
    assert ("test_b_order_dependent", 2, "passed") in attempts
    result.stdout.fnmatch_lines(
        [
            "*ORDER-DEPENDENT: passes alone, fails after test_iso.py::test_a_pollutes*",
            "*1 flaky (failed, then passed when rerun):*",
            "*test_iso.py::test_c_flaky*",
            "*1 order-dependent*",
        ]
    )
