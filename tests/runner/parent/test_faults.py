"""Crashes, hangs and kills in real worlds: nothing is lost, the culprit is named, the rest of the
group runs (which world runs what afterwards is proven in process, `test_scheduler.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpci.schema import read_results
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started


@pytest.mark.parametrize("launcher", ["fork", "torchrun"])  # the default, and the one kept
def test_crash_in_config_k_keeps_earlier_results_and_runs_the_rest_in_one_fresh_world(
    pytester: pytest.Pytester, launcher: str
) -> None:
    pytester.makepyfile(
        """
        import os, signal
        import pytest
        import torch.distributed as dist

        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("i", range(6))
        def test_step(i, cpci_dist):
            if i == 2 and cpci_dist.rank == 1:
                print("about to die", flush=True)
                os._exit(7)
            if i == 4 and cpci_dist.rank == 0:
                os.kill(os.getpid(), signal.SIGSEGV)
            dist.barrier()
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", f"--cpci-launcher={launcher}")
    result.assert_outcomes(passed=4, failed=2)
    assert worlds_started(result.stdout.str()) == 3  # the first, then one after each crash
    records = results(pytester.path / "r.jsonl")
    assert [r["nodeid"].split("::")[1] for r in records] == [f"test_step[{i}]" for i in range(6)]
    assert [r["outcome"] for r in records] == [
        "passed",
        "passed",
        "crashed",
        "passed",
        "crashed",
        "passed",
    ]
    assert [r["batch"]["world"] for r in records] == [0, 0, 0, 1, 1, 2]
    crash = records[2]["rank_errors"]
    assert crash[0]["message"].startswith("rank 1 exited with code 7")
    assert "about to die" in crash[0]["detail"]  # the tail of the rank's log
    assert "was stopped (SIGTERM) after another rank ended" in crash[1]["message"]
    segv = records[4]["rank_errors"][0]
    assert "SIGSEGV" in segv["message"]
    assert "Segmentation fault" in segv["detail"]
    result.stdout.fnmatch_lines(
        ["[[]CRASHED[]] rank 1 exited with code 7*", "FAILED *test_step[[]2[]]*"]
    )


def test_a_hung_config_times_out_with_every_rank_stack_and_the_batch_goes_on(
    pytester: pytest.Pytester,
) -> None:
    """Under the default launcher (torchrun's ranks are stopped the same way after a crash,
    above); the progress line names the stalled config while its world waits."""
    pytester.makepyfile(
        """
        import pytest
        import torch
        import torch.distributed as dist

        def wait_for_partner():
            dist.all_reduce(torch.ones(1))

        @pytest.mark.cpci(world_size=2, timeout=3)
        def test_hangs(cpci_dist):
            if cpci_dist.rank == 0:
                wait_for_partner()  # rank 1 never joins
            else:
                assert False, "rank 1 bailed out"

        @pytest.mark.cpci(world_size=2)
        def test_after(cpci_dist):
            dist.barrier()
        """
    )
    result = pytester.runpytest_subprocess("--cpci-results=r.jsonl", "--cpci-progress-interval=0.5")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "cpci: 0/2 configs done, 0 failed, 0 not run, 2 left, elapsed *, ETA *, "
            "1 world(s) running; waiting on *::test_hangs for 0:0*, its timeout (3 s, from "
            "test_hangs's cpci marker) ends it at 0:*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["* world(s) started*, configs * s (2 config(s); * s of it until 1 timeout(s))"]
    )
    records = by_nodeid(results(pytester.path / "r.jsonl"))
    hung = records[
        "test_a_hung_config_times_out_with_every_rank_stack_and_the_batch_goes_on.py::test_hangs"
    ]
    assert hung["outcome"] == "timeout"
    # Rank 1 failed first (it bailed out; rank 0 then waited for it): rank 1 leads.
    rank1, rank0 = hung["rank_errors"]
    assert (rank1["rank"], rank0["rank"]) == (1, 0)
    assert "did not finish within 3 s" in rank0["message"]
    assert "wait_for_partner" in rank0["detail"]  # rank 0's Python stack, dumped before the kill
    assert "rank 1 bailed out" in rank1["detail"]  # why rank 1 left, from its journal
    assert hung["duration_s"] >= 3
    assert worlds_started(result.stdout.str()) == 2


@pytest.mark.parametrize("victim", ["process group", "parent only"])
def test_results_file_survives_a_sigkill_of_the_whole_run(tmp_path: Path, victim: str) -> None:
    (tmp_path / "test_slow.py").write_text(
        """
import os, time
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(4))
def test_step(i, cpci_dist):
    if i == 3:
        open(os.environ["REACHED"], "w").close()
        time.sleep(600)
"""
    )
    reached = tmp_path / "reached"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cpci-results=r.jsonl"],
        cwd=tmp_path,
        env={**os.environ, "REACHED": str(reached)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results = tmp_path / "r.jsonl"
    deadline = time.monotonic() + 120

    def written() -> int:
        return results.read_text().count("\n") if results.exists() else 0

    # Inside config 3, with the first three results in the file (the parent copies each agreed
    # result from the world a poll interval after the ranks agree on it).
    while not (reached.exists() and written() == 3):
        assert proc.poll() is None, "the run ended before reaching config 3"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    if victim == "process group":  # the pytest parent (and its fork server); ranks have their own
        os.killpg(proc.pid, signal.SIGKILL)
    else:  # the fork server and the ranks must notice the parent is gone by themselves
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    records = read_results(str(tmp_path / "r.jsonl"))
    assert [r.outcome for r in records] == ["passed"] * 3
    assert all(line.endswith("}") for line in (tmp_path / "r.jsonl").read_text().splitlines())
    # The ranks notice their owner is gone and exit: no orphan survives the run.
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(tmp_path)) == []


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if text in cmdline or cwd.startswith(text):
                found.append(int(entry.name))
    return found


def test_crash_at_world_start_is_not_run_for_the_whole_batch_with_the_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(
        "import os\n"
        "if os.environ.get('RANK') == '1':\n"
        "    raise SystemExit('conftest refuses rank 1')\n"
    )
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "@pytest.mark.cpci(world_size=2)\n"
        "@pytest.mark.parametrize('i', range(2))\n"
        "def test_a(i, cpci_dist):\n"
        "    pass\n"
    )
    # Reruns are on, but a config that never ran is not rerun: its world never started. With no
    # respawn allowed, the first world that fails to start gives its group up.
    result = run_pytest(
        tmp_path, "--cpci-results=r.jsonl", "--cpci-reruns=2", "--cpci-max-respawns=0"
    )
    result.assert_outcomes(errors=2)
    records = results(tmp_path / "r.jsonl")
    assert [r["outcome"] for r in records] == ["not_run", "not_run"]
    for record in records:
        first = record["rank_errors"][0]
        assert (first["rank"], first["phase"]) == (-1, "world")
        assert first["message"].startswith("not run: world start-up failed: rank 1 exited")
        assert "conftest refuses rank 1" in first["detail"]
        assert record["attempt"] == 1
    assert worlds_started(result.stdout.str()) == 1  # no respawns, no reruns
    result.stdout.fnmatch_lines(
        [
            "*2 not run (never started: no verdict on their code):*",
            "ERROR *test_a[[]0[]] - not run: world start-up failed*",
        ]
    )
