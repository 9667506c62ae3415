"""Ranks forked from a copy of the pytest process: what they inherit of it, and what they do not;
a parent unfit to fork (another thread, the CUDA driver loaded), and a copy that dies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cpci.runner.launch.fork_rank import NVML_CHECK, driver_loaded
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started

#: In the parent only (a rank's pytest imports this conftest again, with RANK set): an exit
#: handler, a logging handler writing to a file, and the parent's pid.
PARENT_CONFTEST = """
import atexit, logging, os

if "RANK" not in os.environ:
    marks = os.environ["MARKS"]
    atexit.register(lambda: open(os.path.join(marks, f"atexit-{os.getpid()}"), "w").close())
    logging.getLogger().addHandler(logging.FileHandler(os.path.join(marks, "parent.log")))
    with open(os.path.join(marks, "parent-pid"), "w") as out:
        out.write(str(os.getpid()))
"""

SUITE = """
import logging, os
import pytest

LOADED_IN = os.getpid()  # this module is imported afresh in each rank

def f():
    return 2

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(2))
def test_where(i, cpci_dist):
    marks = os.environ["MARKS"]
    zygote = os.getppid()
    with open(f"/proc/{zygote}/stat") as stat:
        grandparent = int(stat.read().rsplit(")", 1)[1].split()[1])
    with open(os.path.join(marks, f"rank-{i}-{cpci_dist.rank}.json"), "w") as out:
        json = __import__("json")
        json.dump({"zygote": zygote, "grandparent": grandparent, "loaded_in": LOADED_IN}, out)
    logging.getLogger("suite").warning("from a rank")

@pytest.mark.cpci(world_size=2)
def test_rewritten(cpci_dist):
    assert f() == 1
"""


def test_ranks_are_forked_from_a_copy_of_the_pytest_process_that_left_its_session_behind(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(PARENT_CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl", env={"MARKS": str(marks)})
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    parent = int((marks / "parent-pid").read_text())
    seen = [json.loads(p.read_text()) for p in sorted(marks.glob("rank-*.json"))]
    assert len(seen) == 4
    zygotes = {s["zygote"] for s in seen}
    assert len(zygotes) == 1  # one copy forked every rank
    assert zygotes != {parent}
    assert {s["grandparent"] for s in seen} == {parent}  # the copy: the pytest process's child
    assert f"ranks forked from a copy of this pytest process (pid {zygotes.pop()})" in out
    # The test module ran again in each rank, and pytest rewrote its asserts there.
    assert parent not in {s["loaded_in"] for s in seen}
    failed = by_nodeid(results(tmp_path / "r.jsonl"))["test_suite.py::test_rewritten"]
    assert "where 2 = f()" in failed["rank_errors"][0]["detail"]
    # The parent's exit handler ran once, in the parent; its log handler heard no rank.
    assert [p.name for p in marks.glob("atexit-*")] == [f"atexit-{parent}"]
    assert "from a rank" not in (marks / "parent.log").read_text()


#: A test module whose import starts a thread in the parent (after the session started, so the
#: fork server is not started early): the parent is not fit to fork once collection is over.
THREAD_SUITE = """
import os, threading
import pytest

if "RANK" not in os.environ:
    threading.Thread(target=threading.Event().wait, name="a-library", daemon=True).start()

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(2))
def test_step(i, cpci_dist):
    pass
"""


def test_a_parent_running_another_thread_is_not_forked_the_fork_server_forks_instead(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_thread.py").write_text(THREAD_SUITE)
    result = run_pytest(tmp_path, "--cpci-results=r.jsonl")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "ranks forked from multiprocessing's fork server" in out
    assert "falling back" not in out


#: The first time it runs, rank 0 of config 0 kills the zygote that forked it (its ranks die
#: with it): the world crashes there, and later worlds can no longer be forked.
KILLS_ZYGOTE = """
import os, signal
import pytest
import torch.distributed as dist

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(3))
def test_step(i, cpci_dist):
    once = os.path.join(os.environ["MARKS"], "killed")
    dist.barrier()  # both ranks are in the config when it dies
    if i == 0 and cpci_dist.rank == 0 and not os.path.exists(once):
        open(once, "w").close()
        os.kill(os.getppid(), signal.SIGKILL)
        signal.pause()
"""


def test_a_zygote_that_dies_fails_the_config_in_flight_and_the_rest_run_under_torchrun(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_kills.py").write_text(KILLS_ZYGOTE)
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run_pytest(
        tmp_path, "--cpci-results=r.jsonl", "--cpci-reruns=0", env={"MARKS": str(marks)}
    )
    out = result.stdout.str()
    records = by_nodeid(results(tmp_path / "r.jsonl"))
    assert records["test_kills.py::test_step[0]"]["outcome"] == "crashed", out
    assert [records[f"test_kills.py::test_step[{i}]"]["outcome"] for i in (1, 2)] == [
        "passed",
        "passed",
    ]
    assert worlds_started(out) == 2
    fallback = [line for line in out.splitlines() if line.startswith("cpci: --cpci-launcher")]
    assert len(fallback) == 1, out
    assert "cpci's zygote" in fallback[0]
    assert "is gone" in fallback[0]
    assert os.path.exists(marks / "killed")


def test_a_loaded_cuda_driver_makes_a_process_unfit_to_fork() -> None:
    # What /proc/self/maps shows once torch.cuda.is_available() has initialised the driver.
    maps = (
        "7f2a1c000000-7f2a1c200000 r-xp 00000000 fd:01 123 /usr/lib/x86_64-linux-gnu/"
        "libcuda.so.535.104.05\n"
        "7f2a1d000000-7f2a1d100000 r-xp 00000000 fd:01 456 /usr/lib/libcudart.so.12\n"
    )
    assert driver_loaded(maps)
    assert not driver_loaded(maps.splitlines()[1])  # the runtime library alone is not the driver
    assert not driver_loaded()  # this machine's own process: no driver (a CPU build of torch)


#: Records, in the parent as it imports its conftest, how torch will check for CUDA.
NVML_CONFTEST = """
import os
if "RANK" not in os.environ:
    with open(os.path.join(os.environ["MARKS"], "nvml"), "w") as out:
        out.write(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK", "unset"))
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("0", "0")])
def test_the_parent_asks_torch_to_check_for_cuda_without_loading_the_driver(
    tmp_path: Path, given: str | None, seen: str
) -> None:
    (tmp_path / "conftest.py").write_text(NVML_CONFTEST)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"MARKS": str(marks)} | ({} if given is None else {NVML_CHECK: given})
    result = run_pytest(tmp_path, env=env, unset=(NVML_CHECK,))
    result.assert_outcomes(passed=1)
    assert (marks / "nvml").read_text() == seen  # set before the first conftest (a user's own kept)
