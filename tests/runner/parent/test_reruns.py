"""--cpci-reruns: failed configs are rerun alone, every attempt is recorded, k of k stays failed;
with --cpci-evidence, adaptive reruns stop where the base branch's record decides a failure, and
--cpci-new-config-runs tries a new config before it lands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cpci.schema import FlakeRecord
from tests.builders import evidence_summary
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


#: `stable` has passed 200 times on the base branch: its failure is decided at once. `known_flaky`
#: failed 10 of 40 times there: its failure is rerun (and passes). `arriving` is new there: it
#: passes, then fails its second run, alone (flaky on arrival).
ADAPTIVE = """
import os
import time
import pytest
import torch.distributed as dist

def runs(name, cpci_dist):
    marks = os.path.join(os.environ["MARKS"], name)
    seen = len(os.listdir(marks)) if os.path.isdir(marks) else 0
    dist.barrier()  # every rank has counted before rank 0 marks this run
    if cpci_dist.rank == 0:
        os.makedirs(marks, exist_ok=True)
        open(os.path.join(marks, str(seen)), "w").close()
    return seen + 1

@pytest.mark.cpci(world_size=2)
def test_stable(cpci_dist):
    time.sleep(0.5)  # the shard's time the arrival runs take a share of
    assert False, "broken by this change"

@pytest.mark.cpci(world_size=2)
def test_known_flaky(cpci_dist):
    assert runs("known_flaky", cpci_dist) > 1, "fails on its first run only"

@pytest.mark.cpci(world_size=2)
def test_arriving(cpci_dist):
    assert runs("arriving", cpci_dist) != 2, "fails on its second run only"
"""


def test_adaptive_reruns_and_arrival_runs_follow_the_evidence_file(tmp_path: Path) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "test_ad.py").write_text(ADAPTIVE)
    known = {
        "test_stable": FlakeRecord(failures=0, trials=200),
        "test_known_flaky": FlakeRecord(failures=10, trials=40),
    }
    summary = evidence_summary({f"test_ad.py::{name}@2": r for name, r in known.items()})
    (tmp_path / "evidence.json").write_text(summary.model_dump_json(by_alias=True))
    result = run_pytest(
        tmp_path,
        "--cpci-results=r.jsonl",
        "--cpci-reruns=2",
        "--cpci-reruns-policy=adaptive",
        "--cpci-evidence=evidence.json",
        "--cpci-new-config-runs=2",
        env={"MARKS": str(tmp_path / "marks")},
    )
    assert result.parseoutcomes() == {"failed": 2, "flaky": 1}, result.stdout.str()
    records = results(tmp_path / "r.jsonl")
    assert _attempts(records) == {
        "test_stable": [(1, "failed")],  # decided: no rerun spent on it
        "test_known_flaky": [(1, "failed"), (2, "passed")],
        "test_arriving": [(1, "passed"), (2, "failed")],  # its first arrival run fails: stop
    }
    final = _final(records)
    assert final["test_stable"]["stop_reason"].startswith("decided after 1 attempt(s): failed 1/1;")
    assert final["test_known_flaky"]["rerun_reason"].endswith(">= 1.0%: rerun 1 of at most 2")
    arriving = [r for r in records if r["nodeid"].endswith("test_arriving")]
    assert ["arrival" in r for r in arriving] == [False, True]
    assert arriving[1]["rerun_reason"] == (
        "new config: arrival run 1 of 2 (--cpci-new-config-runs): no history on the base branch"
    )
    assert arriving[1]["rank_errors"][0]["message"] == (
        "flaky on arrival: passed its first run, then failed arrival run 1 of 2, alone in a "
        "fresh world"
    )
    assert worlds_started(result.stdout.str()) == 3  # shared, one rerun, one arrival run
    result.stdout.fnmatch_lines(
        [
            "*1 failure(s) decided by their base-branch evidence*",
            "*test_ad.py::test_stable: decided after 1 attempt(s)",
            "*1 new config(s) run again alone (--cpci-new-config-runs), 1 FLAKY ON ARRIVAL*",
            "*test_ad.py::test_arriving",
            "*evidence: 2 config(s) from 40 run(s) of main (evidence.json)*",
        ]
    )
