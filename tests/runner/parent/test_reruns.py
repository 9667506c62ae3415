"""--cpci-reruns: failed configs are rerun alone, every attempt is recorded, k of k stays failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runner.helpers import results, run_pytest, worlds_started

#: Each `*_once` config fails on its first run only; the marker directory remembers the run.
SUITE = """
import os
import pytest
import torch.distributed as dist

def first_time(name, cpci_dist):
    marker = os.path.join(os.environ["MARKS"], name)
    first = not os.path.exists(marker)
    dist.barrier()  # every rank has looked before rank 0 leaves the marker
    if cpci_dist.rank == 0 and first:
        open(marker, "w").close()
    return first

@pytest.mark.cpci(world_size=2)
def test_always_fails(cpci_dist):
    assert False, "broken on every attempt"

@pytest.mark.cpci(world_size=2)
def test_fails_once(cpci_dist):
    assert not first_time("fails", cpci_dist), "fails on its first run only"

@pytest.mark.cpci(world_size=2)
def test_crashes_once(cpci_dist):
    if first_time("crashes", cpci_dist) and cpci_dist.rank == 1:
        os._exit(9)
"""


def _attempts(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for record in records:
        out.setdefault(record["nodeid"].split("::")[1], []).append(
            (record["attempt"], record["outcome"])
        )
    return out


def _final(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["nodeid"].split("::")[1]: r for r in records}


def test_reruns_record_every_attempt_and_tell_k_of_k_from_flaky(tmp_path: Path) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "test_rr.py").write_text(SUITE)
    result = run_pytest(
        tmp_path,
        "--cpci-results=r.jsonl",
        "--cpci-reruns=2",
        env={"MARKS": str(tmp_path / "marks")},
    )
    assert result.parseoutcomes() == {"failed": 1, "flaky": 2}, result.stdout.str()
    records = results(tmp_path / "r.jsonl")
    assert _attempts(records) == {
        "test_always_fails": [(1, "failed"), (2, "failed"), (3, "failed")],  # 3 of 3
        "test_fails_once": [(1, "failed"), (2, "passed")],  # stops at the first pass
        "test_crashes_once": [(1, "crashed"), (2, "passed")],
    }
    final = _final(records)
    broken = final["test_always_fails"]
    assert broken["flaky"] is False
    assert broken["isolation"] is None
    assert broken["rank_errors"][0]["rank"] >= 0  # the ranks' own errors lead
    assert broken["rank_errors"][-1] == {
        "rank": -1,
        "phase": "rerun",
        "message": "failed 3/3 attempts",
        "detail": "",
    }
    for name in ("test_fails_once", "test_crashes_once"):
        assert final[name]["outcome"] == "passed"
        assert final[name]["flaky"] is True
        assert final[name]["isolation"] is None  # not isolating: no claim about order
    # Each rerun ran alone in a fresh world: one shared world, then 2 + 1 + 1 alone.
    assert worlds_started(result.stdout.str()) == 5
    assert [r["batch"]["size"] for r in records if r["attempt"] > 1] == [3] * 4
    result.stdout.fnmatch_lines(
        [
            "*failed 3/3 attempts*",
            "*2 flaky (failed, then passed when rerun):*",
        ]
    )


ISOLATED = """
import pytest

STATE = {"polluted": False}

@pytest.mark.cpci(world_size=2)
def test_a_pollutes(cpci_dist):
    STATE["polluted"] = True

@pytest.mark.cpci(world_size=2)
def test_b_order_dependent(cpci_dist):
    assert not STATE["polluted"], "polluted by an earlier config"

@pytest.mark.cpci(world_size=2)
def test_c_broken(cpci_dist):
    assert False, "always broken"
"""


def test_reruns_with_isolation_number_attempts_once_per_config(tmp_path: Path) -> None:
    (tmp_path / "test_iso.py").write_text(ISOLATED)
    result = run_pytest(
        tmp_path, "--cpci-results=r.jsonl", "--cpci-reruns=2", "--cpci-isolate-failures"
    )
    assert result.parseoutcomes() == {"passed": 1, "failed": 2}, result.stdout.str()
    records = results(tmp_path / "r.jsonl")
    # The isolating alone run is the first rerun; the replay after the predecessors comes next.
    assert _attempts(records) == {
        "test_a_pollutes": [(1, "passed")],
        "test_b_order_dependent": [(1, "failed"), (2, "passed"), (3, "failed")],
        "test_c_broken": [(1, "failed"), (2, "failed"), (3, "failed")],
    }
    final = _final(records)
    order = final["test_b_order_dependent"]
    assert (order["outcome"], order["isolation"], order["flaky"]) == (
        "failed",
        "order-dependent",
        False,
    )
    assert order["rank_errors"][0]["message"] == (
        "order-dependent: passes alone, fails after test_iso.py::test_a_pollutes"
    )
    assert "polluted by an earlier config" in order["rank_errors"][1]["message"]
    broken = final["test_c_broken"]
    assert broken["isolation"] == "fails-alone"
    assert broken["rank_errors"][-1]["message"] == "failed 3/3 attempts"
    assert worlds_started(result.stdout.str()) == 5  # shared, then 2 for b and 2 for c
    result.stdout.fnmatch_lines(
        [
            "*ORDER-DEPENDENT: passes alone, fails after test_iso.py::test_a_pollutes*",
            "FAILED *test_b_order_dependent - order-dependent: passes alone*",
        ]
    )
