"""--cpci-testcases=shared: torch's multi-process harness classes run unchanged in cpci's worlds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prerequisites import import_or_skip
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started


@pytest.fixture(autouse=True)
def _expecttest() -> None:
    import_or_skip("expecttest", "expecttest", "torch.testing._internal needs expecttest")


SUITE = """
import os
import sys
import unittest

import pytest
import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import (
    TEST_SKIPS,
    MultiProcContinuousTest,
    MultiProcessTestCase,
)
from torch.testing._internal.distributed._tensor.common_dtensor import DTensorTestBase, with_comms

SEEN = os.environ["SEEN"]


def note(test, text):
    with open(os.path.join(SEEN, f"{test}-{dist.get_rank()}"), "w") as f:
        f.write(text)


class TestDTensorStyle(DTensorTestBase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        os.environ["FROM_SETUP"] = str(os.getpid())  # differs per rank: rank 0's must win

    @with_comms
    def test_a_harness_attributes(self):
        mine = (self.file_name, os.environ["FROM_SETUP"], self.device_type, self.backend)
        got = [None] * self.world_size
        dist.all_gather_object(got, (self.rank, dist.get_world_size(), *mine))
        assert [g[0] for g in got] == [0, 1] and {g[1] for g in got} == {2}
        assert len({g[2:] for g in got}) == 1, got
        note("attributes", self.file_name)

    @with_comms
    def test_b_next_config_gets_a_fresh_file(self):
        note("fresh", self.file_name)

    def test_c_skip_exit_code(self):
        sys.exit(TEST_SKIPS["multi-gpu-4"].exit_code)


class TestSizedByEnvironment(MultiProcessTestCase):
    @property
    def world_size(self):
        return os.environ["HARNESS_WORLD_SIZE"]  # a string, as distributed_test's WORLD_SIZE

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_own_group_on_the_file_store(self):
        store = dist.FileStore(self.file_name, int(self.world_size))
        dist.init_process_group("gloo", store=store, rank=self.rank, world_size=3)
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == 3


class TestContinuous(MultiProcContinuousTest):
    world_size = 2

    @classmethod
    def backend_str(cls):
        return "gloo"

    @classmethod
    def device_type(cls):
        return "cpu"

    def test_a_fails(self):
        assert False, "the first test fails"

    def test_b_still_runs(self):
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == 2


class TestPlain(MultiProcessTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        exits = self.test_exits_3_on_purpose  # join_or_run wraps the method under test
        self.skip_return_code_checks = [getattr(exits, "__wrapped__", exits)]
        self._spawn_processes()

    def test_exits_3_on_purpose(self):
        os._exit(3)  # the harness does not check this test's exit codes: it passes stock

    def test_rank_1_only_fails(self):
        assert self.rank != 1, "rank 1 says no"

    @unittest.skip("skipped the unittest way")
    def test_unittest_skip(self):
        raise AssertionError("never runs")

    @pytest.mark.cpci(world_size=2)  # its marker merges: still skipped before planning
    @unittest.skip("skipped in the ranks")
    def test_unittest_skip_marked(self):
        raise AssertionError("never runs")

    def test_z_crashes(self):
        if self.rank == 1:
            os._exit(9)
        dist.FileStore(self.file_name, 2).wait(["never"])  # rank 0 waits for rank 1
"""

UNSIZED = """
import os

from torch.testing._internal.common_distributed import MultiProcContinuousTest, MultiProcessTestCase


class TestUnsized(MultiProcessTestCase):
    @property
    def world_size(self):
        return int(os.environ["UNSET_WORLD_SIZE"])

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_a(self):
        pass


class TestNoDevices(MultiProcContinuousTest):
    @classmethod
    def device_type(cls):
        return "cuda"

    def test_a(self):
        pass
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path, Path]:
    path = tmp_path_factory.mktemp("testcases")
    (path / "test_harness.py").write_text(SUITE)
    seen = path / "seen"
    seen.mkdir()
    env = {"SEEN": str(seen), "HARNESS_WORLD_SIZE": "3"}
    result = run_pytest(
        path, "--cpci-testcases=shared", "--cpci-results=r.jsonl", "-rA", env=env, timeout=600
    )
    return result, path, seen


def outcomes(path: Path) -> dict[str, str]:
    return {n.split("::", 1)[1]: r["outcome"] for n, r in by_nodeid(results(path)).items()}


def test_every_test_is_a_config_with_the_harness_outcome(
    run: tuple[pytest.RunResult, Path, Path],
) -> None:
    result, path, _ = run
    assert outcomes(path / "r.jsonl") == {
        "TestDTensorStyle::test_a_harness_attributes": "passed",
        "TestDTensorStyle::test_b_next_config_gets_a_fresh_file": "passed",
        "TestDTensorStyle::test_c_skip_exit_code": "skipped",
        "TestSizedByEnvironment::test_own_group_on_the_file_store": "passed",
        "TestPlain::test_exits_3_on_purpose": "passed",  # its own spawn, in the parent
        "TestPlain::test_rank_1_only_fails": "failed",
        "TestPlain::test_unittest_skip": "skipped",  # before planning, as for skip marks
        "TestPlain::test_unittest_skip_marked": "skipped",
        "TestPlain::test_z_crashes": "crashed",
        "TestContinuous::test_a_fails": "failed",
        "TestContinuous::test_b_still_runs": "passed",  # no poison pill
    }
    assert worlds_started(result.stdout.str()) == 2  # one per world size: 2 and 3
    # The skip is located at the test, as pytest locates unittest skips.
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_harness.py:*: Need at least 4 CUDA devices"])


def test_world_size_comes_from_the_class(run: tuple[pytest.RunResult, Path, Path]) -> None:
    _, path, _ = run
    sizes = {r["nodeid"].split("::", 1)[1]: r["world_size"] for r in results(path / "r.jsonl")}
    assert sizes["TestSizedByEnvironment::test_own_group_on_the_file_store"] == 3
    assert sizes["TestDTensorStyle::test_a_harness_attributes"] == 2
    assert sizes["TestContinuous::test_b_still_runs"] == 2


def test_ranks_share_one_rendezvous_file_per_config(
    run: tuple[pytest.RunResult, Path, Path],
) -> None:
    _, _, seen = run
    attributes = {(seen / f"attributes-{r}").read_text() for r in (0, 1)}
    fresh = {(seen / f"fresh-{r}").read_text() for r in (0, 1)}
    assert len(attributes) == 1
    assert len(fresh) == 1
    assert attributes != fresh
    assert not Path(fresh.pop()).exists()  # removed after its config


def test_a_rank_1_failure_carries_rank_1s_traceback(
    run: tuple[pytest.RunResult, Path, Path],
) -> None:
    _, path, _ = run
    record = by_nodeid(results(path / "r.jsonl"))[
        "test_harness.py::TestPlain::test_rank_1_only_fails"
    ]
    assert [e["rank"] for e in record["rank_errors"]] == [1]
    error = record["rank_errors"][0]
    assert error["message"].endswith(  # after the exception's type, as pytest names it
        "HarnessExit: rank 1 exited with error code 10 and exception: "
        "AssertionError: rank 1 says no"
    )
    assert "AssertionError: rank 1 says no" in error["detail"]


def test_a_crash_is_blamed_on_its_config(run: tuple[pytest.RunResult, Path, Path]) -> None:
    _, path, _ = run
    record = by_nodeid(results(path / "r.jsonl"))["test_harness.py::TestPlain::test_z_crashes"]
    assert record["rank_errors"][0]["message"].startswith("rank 1 exited with code 9")


def test_off_leaves_the_harness_its_own_spawn_and_plan_lists_own_spawns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_harness=SUITE, test_unsized=UNSIZED)
    monkeypatch.setenv("SEEN", str(pytester.mkdir("seen")))
    monkeypatch.setenv("HARNESS_WORLD_SIZE", "3")
    off = pytester.runpytest_subprocess("--cpci-plan")
    off.stdout.fnmatch_lines(["cpci plan*: 1 config(s)*"])  # only the explicitly marked one
    shared = pytester.runpytest_subprocess("--cpci-plan", "--cpci-testcases=shared")
    shared.stdout.fnmatch_lines(
        [
            "cpci plan*: 8 config(s)*",  # test_unittest_skip_marked: skipped, marker or not
            "*not runnable: test_unsized.py::TestUnsized::test_a: --cpci-testcases=shared: "
            "cannot tell the world size of TestUnsized (KeyError: 'UNSET_WORLD_SIZE'); set what "
            "its world_size reads (e.g. WORLD_SIZE), or mark the test "
            "@pytest.mark.cpci(world_size=N)",
            "*own spawn (not in a world): test_harness.py::TestPlain::test_exits_3_on_purpose: "
            "keeps its own spawn: TestPlain.setUp puts it in skip_return_code_checks*",
        ]
    )
    shared.stdout.fnmatch_lines(["*test_unsized.py::TestNoDevices::test_a: No cuda devices*"])


#: DTensorTestBase tests that fail on rank 1 only, ROUNDS times over. Rank 1 fails and leaves
#: while rank 0 is in `destroy_pg`'s barrier, waiting for it: stock, rank 1's process exits and
#: the harness terminates rank 0. In a cpci world rank 1 lives on, and whether its process group
#: dies with `destroy_process_group` depends on what still holds it: nothing in `test_a`, a
#: DeviceMesh in `test_b` (its peer then waited out the whole config timeout, every time).
ONE_RANK_FAILS = """
import os

import torch
import torch.distributed as dist
from torch.distributed.tensor import Shard, distribute_tensor
from torch.testing._internal.distributed._tensor.common_dtensor import DTensorTestBase, with_comms


@with_comms
def test_a_fails_at_once(self):
    assert self.rank != 1, "rank 1 says no"


@with_comms
def test_b_fails_holding_a_mesh(self):
    mesh = self.build_device_mesh()
    full = distribute_tensor(torch.arange(4.0), mesh, [Shard(0)]).full_tensor()
    assert self.rank != 1, f"rank 1 says no to {full.tolist()}"


@with_comms
def test_c_after(self):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == self.world_size


METHODS = {
    "world_size": property(lambda self: 2),
    "test_a_fails_at_once": test_a_fails_at_once,
    "test_b_fails_holding_a_mesh": test_b_fails_holding_a_mesh,
    "test_c_after": test_c_after,
}
for i in range(int(os.environ["ROUNDS"])):
    globals()[f"TestRound{i}"] = type(f"TestRound{i}", (DTensorTestBase,), dict(METHODS))
del test_a_fails_at_once, test_b_fails_holding_a_mesh, test_c_after
"""


def test_a_one_rank_failure_never_waits_out_the_config_timeout(tmp_path: Path) -> None:
    rounds = 5
    (tmp_path / "test_one_rank.py").write_text(ONE_RANK_FAILS)
    result = run_pytest(
        tmp_path,
        "--cpci-testcases=shared",
        "--cpci-timeout=60",
        "--cpci-results=r.jsonl",
        env={"ROUNDS": str(rounds)},
        timeout=600,
    )
    records = by_nodeid(results(tmp_path / "r.jsonl"))
    seen = [(n.split("::")[2], r["outcome"]) for n, r in records.items()]
    assert sorted(seen) == sorted(
        [("test_a_fails_at_once", "failed"), ("test_b_fails_holding_a_mesh", "failed")] * rounds
        + [("test_c_after", "passed")] * rounds
    ), result.stdout.str()
    for nodeid, record in records.items():
        if record["outcome"] == "failed":
            texts = " ".join(e["detail"] for e in record["rank_errors"])
            assert "rank 1 says no" in texts, nodeid  # the failing rank's own traceback
    # Rank 0 never left test_b on its own: the world was ended after rank 1 failed, as the harness
    # ends it, with rank 1's failure first and where rank 0 waited (its stack) after it.
    ended = [r for r in records.values() if any(e["rank"] == -1 for e in r["rank_errors"])]
    assert ended, "no world was ended: the case no longer holds rank 1's process group"
    for record in ended:
        entries = [(e["rank"], e["phase"]) for e in record["rank_errors"]]
        assert entries == [(1, "call"), (0, "world"), (-1, "world")]
        assert "rank 0 was still inside the test" in record["rank_errors"][1]["message"]
        assert "destroy_pg" in record["rank_errors"][1]["detail"]
