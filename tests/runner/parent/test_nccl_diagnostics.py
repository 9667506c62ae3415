"""Worlds run with NCCL's flight recorder on, and a timed-out config carries each rank's dump."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from cpci.runner.parent import nccl_diagnostics
from tests.runner.helpers import by_nodeid, results

SUITE = """
import os
import pickle
import time
import pytest

@pytest.mark.cpci(world_size=2)
def test_flight_recorder_is_on(cpci_dist):
    stem = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "5"  # the user's own value wins
    assert os.environ["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == stem
    # The dump goes into this world's own directory (next to plan.json), nowhere shared.
    assert os.path.exists(os.path.join(os.path.dirname(stem), "plan.json"))
    assert os.path.basename(stem) == "nccl-trace-rank-"

@pytest.mark.cpci(world_size=2, timeout=3)
def test_hangs_in_a_collective(cpci_dist):
    # What NCCL's watchdog would write: a pickled record of this rank's last collectives.
    record = {"entries": [{"profiling_name": "nccl:all_reduce", "collective_seq_id": 7,
                           "state": "scheduled", "rank": cpci_dist.rank}]}
    path = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + str(cpci_dist.rank)
    with open(path, "wb") as fh:
        pickle.dump(record, fh)
    time.sleep(600)
"""


def test_worlds_get_the_flight_recorder_and_a_timeout_carries_each_rank_dump(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_nccl=SUITE)
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "5")
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl")
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    assert records["test_nccl.py::test_flight_recorder_is_on"]["outcome"] == "passed"
    hung = records["test_nccl.py::test_hangs_in_a_collective"]
    assert hung["outcome"] == "timeout", result.stdout.str()
    by_rank = {e["rank"]: e["detail"] for e in hung["rank_errors"]}
    for rank in (0, 1):
        assert f"--- NCCL flight recorder of rank {rank} ---" in by_rank[rank]
        assert "'profiling_name': 'nccl:all_reduce'" in by_rank[rank]
        assert f"'rank': {rank}" in by_rank[rank]


def test_the_users_own_settings_win(tmp_path: Path) -> None:
    env = nccl_diagnostics.world_env(tmp_path, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "5"})
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env
    assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "nccl-trace-rank-")


def test_dumps_are_capped_and_only_plain_data_is_unpickled(tmp_path: Path) -> None:
    (tmp_path / "nccl-trace-rank-0").write_bytes(pickle.dumps({"x": "y" * 50_000}))
    (tmp_path / "nccl-trace-rank-1").write_bytes(pickle.dumps(Path("/etc")))  # a class: refused
    (tmp_path / "nccl-trace-rank-0.pipe").write_text("")  # not a dump
    dumps = nccl_diagnostics.collect(tmp_path)
    assert set(dumps) == {0, 1}
    assert len(dumps[0]) < nccl_diagnostics.DUMP_CAP + 200
    assert "more characters in" in dumps[0]
    # Shown as raw text, never loaded (a loaded one would read "PosixPath('/etc')").
    assert "PosixPath" in dumps[1]
    assert "PosixPath('/etc')" not in dumps[1]
