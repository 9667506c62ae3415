"""Forked ranks look like torchrun's, keep pytest's assertion rewriting, and fall back to torchrun
where forking is unsafe."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpci.runner.launch.fork_rank import UNSAFE_FORK_EXIT
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started

ENV_SUITE = """
import atexit, json, os
import pytest

def f():
    return 2

@pytest.mark.cpci(world_size=2)
def test_env(cpci_dist):
    with open(os.path.join(os.environ["MARKS"], f"env-{cpci_dist.rank}.json"), "w") as out:
        json.dump(dict(os.environ), out)
    atexit.register(open, os.path.join(os.environ["MARKS"], f"atexit-{cpci_dist.rank}"), "w")

@pytest.mark.cpci(world_size=2)
def test_rewritten(cpci_dist):
    assert f() == 1
"""

#: What torchrun's agent gives a worker (torch/distributed/elastic/agent/server): the fork
#: launcher gives the same.
AGENT_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
)


def _rank_env(tmp_path: Path, launcher: str) -> list[dict[str, str]]:
    marks = tmp_path / launcher
    marks.mkdir()
    result = run_pytest(
        tmp_path,
        "--cpci-results=r.jsonl",
        f"--cpci-launcher={launcher}",
        "--cpci-batch-size=1",  # a world per config: both end on their own
        env={"MARKS": str(marks), "CUDA_VISIBLE_DEVICES": ""},
    )
    result.assert_outcomes(passed=1, failed=1)
    failed = by_nodeid(results(tmp_path / "r.jsonl"))["test_env_suite.py::test_rewritten"]
    assert "where 2 = f()" in failed["rank_errors"][0]["detail"]  # pytest rewrote the module
    assert all((marks / f"atexit-{rank}").exists() for rank in range(2))  # exit handlers ran
    return [json.loads((marks / f"env-{rank}.json").read_text()) for rank in range(2)]


def test_forked_ranks_get_torchruns_environment_rewritten_asserts_and_exit_handlers(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_env_suite.py").write_text(ENV_SUITE)
    forked = _rank_env(tmp_path, "fork")
    started = _rank_env(tmp_path, "torchrun")
    for rank in range(2):
        mine = {k: forked[rank].get(k) for k in AGENT_VARS}
        theirs = {k: started[rank].get(k) for k in AGENT_VARS}
        for differs in ("MASTER_PORT", "TORCHELASTIC_RUN_ID", "MASTER_ADDR"):
            assert mine.pop(differs), differs  # set on both, per world
            assert theirs.pop(differs), differs
        assert mine == theirs
        assert forked[rank]["RANK"] == forked[rank]["LOCAL_RANK"] == str(rank)


UNSAFE_SUITE = """
import os
import pytest
import torch

# What a module that touches the GPU at import leaves behind, torch's own flag that CUDA is
# initialised in this process, set where this machine (which may have no GPU) would not mind:
# in the fork server (no RANK yet), not in a rank of its own as torchrun starts them.
if "RANK" not in os.environ:
    torch.cuda._initialized = True

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(2))
def test_step(i, cpci_dist):
    pass
"""


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A TMPDIR under /tmp: multiprocessing's fork server listens on a socket in it, and a socket
    path holds at most 107 bytes (under xdist, tmp_path alone takes about 70)."""
    short = Path(tempfile.mkdtemp(prefix="cpci-t-", dir="/tmp"))
    yield short
    shutil.rmtree(short, ignore_errors=True)


def test_a_fork_server_with_cuda_initialised_falls_back_to_torchrun_once(
    tmp_path: Path, short_tmpdir: Path
) -> None:
    (tmp_path / "test_unsafe.py").write_text(UNSAFE_SUITE)
    result = run_pytest(
        tmp_path,
        "--cpci-results=r.jsonl",
        "--cpci-launcher=fork",
        "--cpci-batch-size=1",
        env={"CPCI_KEEP_WORLDS": "1", "TMPDIR": str(short_tmpdir)},
    )
    result.assert_outcomes(passed=2)
    assert worlds_started(result.stdout.str()) == 2  # the refused world restarted in place
    out = result.stdout.str()
    why = "CUDA was initialised in the process this rank forked from"
    fallback = [line for line in out.splitlines() if line.startswith("cpci: --cpci-launcher")]
    assert len(fallback) == 1, out
    assert "falling back to torchrun for the rest of the session" in fallback[0]
    assert why in fallback[0]
    assert "PytestLauncherWarning" in out  # in pytest's warnings summary
    first, second = sorted(short_tmpdir.glob("cpci-run-*/world-*"))
    # The first world's ranks refused (the code is in their log), then torchrun ran it.
    assert f"exiting with code {UNSAFE_FORK_EXIT}" in (first / "rank-0.log").read_text()
    assert (first / "torchrun.log").exists()
    assert (second / "torchrun.log").exists()  # the rest of the session: torchrun from the start
    assert "refused" not in (second / "rank-0.log").read_text()
    assert [r["outcome"] for r in results(tmp_path / "r.jsonl")] == ["passed", "passed"]


#: Records, while the parent is still collecting, whether the fork server is already up and what
#: it was told to preload. With THREAD set, it starts a thread in the parent first (as some
#: plugins do): then the parent will not be fit to fork once collection is over.
EARLY_CONFTEST = """
import json, os, threading
from cpci.runner.plugin import SESSION

if os.environ.get("THREAD") and "RANK" not in os.environ:
    threading.Thread(target=threading.Event().wait, name="a-plugin", daemon=True).start()

def pytest_collection_modifyitems(config, items):
    if SESSION not in config.stash:
        return  # a rank
    launcher = config.stash[SESSION].launcher
    server = None if launcher is None else launcher.forker
    seen = {"server": None}
    if server is not None:
        os.kill(server.pid, 0)  # raises if the server is not running
        seen = {"server": server.pid, "files": server.spec.files, "dirs": server.spec.dirs}
    with open(os.environ["SEEN"], "w") as out:
        json.dump(seen, out)
"""

EARLY_SUITE = """
import os
import pytest

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range(2))
def test_step(i, cpci_dist):
    with open(os.path.join(os.environ["MARKS"], f"parent-{i}-{cpci_dist.rank}"), "w") as out:
        out.write(str(os.getppid()))
"""


def test_a_parent_running_a_thread_starts_the_fork_server_before_collection_ends(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(EARLY_CONFTEST)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_early.py").write_text(EARLY_SUITE)
    (tmp_path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run_pytest(
        tmp_path,
        "tests",
        "--cpci-launcher=fork",
        env={"MARKS": str(marks), "SEEN": str(tmp_path / "seen.json"), "THREAD": "1"},
    )
    result.assert_outcomes(passed=3)
    assert "ranks forked from multiprocessing's fork server" in result.stdout.str()
    seen = json.loads((tmp_path / "seen.json").read_text())
    # Up while the parent collected; of the directory's files, the one that can hold configs.
    assert seen["files"] == [str((tmp_path / "tests" / "test_early.py").resolve())]
    assert seen["dirs"] == [str((tmp_path / "tests").resolve())]
    # Every rank was forked from that early server.
    parents = {p.read_text() for p in marks.glob("parent-*")}
    assert len(list(marks.glob("parent-*"))) == 4
    assert parents == {str(seen["server"])}


@pytest.mark.parametrize(
    ("suite", "args"),
    [
        ("def test_plain():\n    pass\n", ["--cpci-launcher=fork"]),  # nothing can be a config
        (EARLY_SUITE, ["--cpci-launcher=fork", "--collect-only"]),
        (EARLY_SUITE, ["--cpci-launcher=fork", "--cpci-plan"]),
        (EARLY_SUITE, ["--cpci-launcher=torchrun"]),
        (EARLY_SUITE, ["--cpci-launcher=fork"]),  # fit to fork: its own copy forks the ranks
    ],
    ids=["plain", "collect-only", "plan", "torchrun", "zygote"],
)
def test_no_fork_server_is_started_before_collection_unless_it_is_needed(
    tmp_path: Path, suite: str, args: list[str]
) -> None:
    (tmp_path / "conftest.py").write_text(EARLY_CONFTEST)
    (tmp_path / "test_early.py").write_text(suite)
    seen = tmp_path / "seen.json"
    run_pytest(tmp_path, *args, env={"MARKS": str(tmp_path), "SEEN": str(seen)})
    assert json.loads(seen.read_text()) == {"server": None}


#: A worker module beside its test, imported the two ways pytest's default import mode allows.
WORKER = """
import torch.distributed as dist

def rank_and_size():
    return dist.get_rank(), dist.get_world_size()
"""
SIBLING_TEST = """
import pytest

from {module} import rank_and_size

@pytest.mark.cpci(world_size=2)
def test_uses_its_sibling(cpci_dist):
    assert rank_and_size() == (cpci_dist.rank, 2)
"""


@pytest.mark.parametrize("launcher", ["fork", "torchrun"])
@pytest.mark.parametrize(
    ("package", "module"), [(False, "worker"), (True, "tests.worker")], ids=["flat", "package"]
)
def test_a_test_imports_its_sibling_worker_module_in_the_ranks(
    tmp_path: Path, launcher: str, package: bool, module: str
) -> None:
    """As docs/porting.md says: `tests/` beside its worker, the worker by its bare name; `tests/`
    a package, by the package's name (pytest puts the package's parent on sys.path)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    if package:
        (tests / "__init__.py").write_text("")
    (tests / "worker.py").write_text(WORKER)
    (tests / "test_sibling.py").write_text(SIBLING_TEST.format(module=module))
    result = run_pytest(tmp_path, "tests", f"--cpci-launcher={launcher}")
    result.assert_outcomes(passed=1)
