"""Each config is its own pytest test: outcomes, fixtures, parametrize, JUnit, --lf, agreement."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started

SUITE = """
import os
import pytest
import torch
import torch.distributed as dist

@pytest.fixture
def tensor(cpci_dist):
    return torch.full((4,), float(cpci_dist.rank + 1))

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("scale", [1, 2])
def test_all_reduce(tensor, scale, cpci_dist):
    out = tensor * scale
    dist.all_reduce(out)
    assert out[0].item() == 3 * scale
    assert dist.get_world_size() == 2 and dist.get_rank() == cpci_dist.rank
    cpci_dist.record_metric("max_abs_err", 0.5 * (cpci_dist.rank + 1))
    with open(os.path.join(os.environ["MARKS"], f"{os.getpid()}-{cpci_dist.rank}-{scale}"), "w"):
        pass

@pytest.mark.cpci(world_size=2)
def test_rank1_only_fails(cpci_dist):
    assert cpci_dist.rank != 1, "rank 1 disagrees"

@pytest.mark.cpci(world_size=2)
def test_skip_in_body(cpci_dist):
    pytest.skip("not today")

@pytest.mark.cpci(world_size=2)
@pytest.mark.skipif(True, reason="marked skip")
def test_skipif():
    raise AssertionError("never runs")

@pytest.mark.cpci(world_size=2)
@pytest.mark.xfail(reason="known bug", strict=True)
def test_xfail(cpci_dist):
    assert False

@pytest.mark.cpci(world_size=2)
def test_sets_env(cpci_dist):
    os.environ["CPCI_LEAK"] = "1"
    torch.set_default_dtype(torch.float64)

@pytest.mark.cpci(world_size=2)
def test_env_was_reset(cpci_dist):
    assert "CPCI_LEAK" not in os.environ
    assert torch.get_default_dtype() == torch.float32

@pytest.mark.cpci(world_size=2)
def test_seed_is_per_config(cpci_dist):
    value = torch.rand(1).item()
    values = [None, None]
    dist.all_gather_object(values, value)
    assert values[0] == values[1]  # same seed on every rank

@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture preparation failed")

@pytest.mark.cpci(world_size=2)
def test_fixture_error(broken_fixture):
    pass

@pytest.mark.cpci(world_size=2)
def test_runs_after_errors(cpci_dist):
    dist.barrier()

def test_plain():
    pass
"""


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path]:
    """One run of the suite above, shared by the tests of this module (one world start)."""
    path = tmp_path_factory.mktemp("basics")
    marks = path / "marks"
    marks.mkdir()
    (path / "test_suite.py").write_text(SUITE)
    # The user's ini reaches the ranks too (options of the terminal reporter included).
    (path / "pytest.ini").write_text(
        "[pytest]\naddopts = -ra --strict-markers\nxfail_strict = true\n"
    )
    result = run_pytest(
        path,
        "--cpci-results=results.jsonl",
        "--junitxml=junit.xml",
        "-rA",
        env={"MARKS": str(marks)},
    )
    return result, path


def test_every_config_is_its_own_test(suite_run: tuple[pytest.RunResult, Path]) -> None:
    result, path = suite_run
    marks = path / "marks"
    result.assert_outcomes(passed=7, failed=1, skipped=2, xfailed=1, errors=1)
    assert worlds_started(result.stdout.str()) == 1
    records = by_nodeid(results(path / "results.jsonl"))
    outcomes = {n.split("::")[1]: r["outcome"] for n, r in records.items()}
    assert outcomes == {
        "test_all_reduce[1]": "passed",
        "test_all_reduce[2]": "passed",
        "test_rank1_only_fails": "failed",
        "test_skip_in_body": "skipped",
        "test_skipif": "skipped",
        "test_xfail": "xfailed",
        "test_sets_env": "passed",
        "test_env_was_reset": "passed",
        "test_seed_is_per_config": "passed",
        "test_fixture_error": "error",
        "test_runs_after_errors": "passed",
        "test_plain": "passed",
    }
    reduce_1 = records["test_suite.py::test_all_reduce[1]"]
    assert reduce_1["world_size"] == 2
    assert reduce_1["backend"] == "gloo"
    assert reduce_1["params"] == {"scale": 1}
    assert reduce_1["metrics"] == {"max_abs_err": 1.0}  # max over ranks
    start_s = reduce_1["batch"].pop("start_s")
    # 10, not 11: test_skipif is skipped in the parent and never joins the world.
    assert reduce_1["batch"] == {"index": 0, "world": 0, "size": 10}
    assert 0 < start_s < 120  # the world's start-up, measured apart from the configs
    # The body ran on both ranks, in processes other than the parent pytest.
    pids = {name.split("-")[0] for name in (p.name for p in marks.iterdir())}
    ranks = sorted(name.split("-")[1] for name in (p.name for p in marks.iterdir()))
    assert ranks == ["0", "0", "1", "1"]
    assert len(pids) == 2


def test_a_failure_on_rank_one_only_is_reported_with_its_traceback(
    suite_run: tuple[pytest.RunResult, Path],
) -> None:
    result, path = suite_run
    records = by_nodeid(results(path / "results.jsonl"))
    failed = records["test_suite.py::test_rank1_only_fails"]
    assert [e["rank"] for e in failed["rank_errors"]] == [1]
    assert "rank 1 disagrees" in failed["rank_errors"][0]["message"]
    result.stdout.fnmatch_lines(
        [
            "outcome failed on rank 1 (world size 2), group 0 (world 0, 10 configs), attempt 1",
            "FAILED test_suite.py::test_rank1_only_fails*",
        ]
    )
    error = records["test_suite.py::test_fixture_error"]
    assert error["rank_errors"][0]["phase"] == "setup"
    assert "fixture preparation failed" in error["rank_errors"][0]["detail"]


def test_junit_has_one_testcase_per_config(suite_run: tuple[pytest.RunResult, Path]) -> None:
    _, path = suite_run
    cases = list(ET.parse(path / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 12
    assert len({c.get("name") for c in cases}) == 12
    failing = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failing == ["test_rank1_only_fails"]
    # Real per-config durations: world start-up is not billed to the first config.
    durations = [float(c.get("time", "0")) for c in cases]
    assert max(durations) < 2.0, durations


def test_last_failed_reruns_only_the_failures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("bad", [False, True])
        def test_x(bad, cpci_dist):
            assert not bad
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1, failed=1)
    again = pytester.runpytest_subprocess("--lf")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["collected 1 item*", "run-last-failure: rerun previous 1 failure*"])


def test_pyargs_from_outside_the_rootdir(pytester: pytest.Pytester) -> None:
    """pytest names such files relative to the argument: the ranks must name them alike."""
    package = pytester.mkpydir("cpci_pyargs_pkg")
    (package / "test_in_pkg.py").write_text(
        "import pytest\n"
        "@pytest.mark.cpci(world_size=2)\n"
        "@pytest.mark.parametrize('i', [0, 1])\n"
        "def test_x(i, cpci_dist):\n"
        "    pass\n"
    )
    elsewhere = pytester.mkdir("elsewhere")
    result = run_pytest(
        elsewhere, "--pyargs", "cpci_pyargs_pkg", env={"PYTHONPATH": str(pytester.path)}
    )
    result.assert_outcomes(passed=2)
