"""Configs sharing a world see torch's defaults whatever the config before them changed.

One world of two ranks runs a config that flips every process-wide flag cpci resets, then one that
asserts each is back; the suite's `pytest_cpci_reset` hook is called once per config per rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner.rank.config_state import ConfigState
from tests.runner.helpers import by_nodeid, results, run_pytest, worlds_started

CONFTEST = """
import os

def pytest_cpci_reset(config_nodeid):
    rank = os.environ["RANK"]
    name = config_nodeid.rsplit("::", 1)[-1]
    with open(os.path.join(os.environ["RESETS"], f"{rank}-{name}"), "a") as fh:
        fh.write("reset\\n")
    if name == "test_reset_hook_fails":
        raise RuntimeError("library state would not reset")
"""

SUITE = """
import pytest
import torch

DEFAULTS = {}

def flags():
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    return {
        "dtype": torch.get_default_dtype(),
        "device": torch.get_default_device(),
        "grad": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "threads": torch.get_num_threads(),
        "precision": torch.get_float32_matmul_precision(),
        "matmul_tf32": cuda.matmul.allow_tf32,
        "cudnn_tf32": cudnn.allow_tf32,
        "benchmark": cudnn.benchmark,
        "cudnn_deterministic": cudnn.deterministic,
        "flash": cuda.flash_sdp_enabled(),
        "mem_efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
        "cudnn_sdp": cuda.cudnn_sdp_enabled(),
    }

@pytest.mark.cpci(world_size=2)
def test_changes_every_flag(cpci_dist):
    before = flags()
    torch.set_default_dtype(torch.float64)
    torch.set_default_device("meta")
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(before["threads"] + 1)
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.allow_tf32 = not before["cudnn_tf32"]
    torch.backends.cudnn.benchmark = not before["benchmark"]
    torch.backends.cudnn.deterministic = not before["cudnn_deterministic"]
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(False)
    after = flags()
    assert all(after[k] != before[k] for k in before), {
        k: v for k, v in after.items() if v == before[k]
    }
    DEFAULTS.update(before)

@pytest.mark.cpci(world_size=2)
def test_sees_the_defaults(cpci_dist):
    assert DEFAULTS, "test_changes_every_flag ran first in this world"
    assert flags() == DEFAULTS

@pytest.mark.cpci(world_size=2)
def test_reset_hook_fails(cpci_dist):
    pass
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.RunResult, Path, Path]:
    path = tmp_path_factory.mktemp("state")
    (path / "conftest.py").write_text(CONFTEST)
    (path / "test_state.py").write_text(SUITE)
    resets = path / "resets"
    resets.mkdir()
    result = run_pytest(path, "--cpci-results=r.jsonl", "-rA", env={"RESETS": str(resets)})
    return result, path, resets


def test_the_next_config_sees_every_flag_back_at_its_default(
    run: tuple[pytest.RunResult, Path, Path],
) -> None:
    result, path, _ = run
    records = by_nodeid(results(path / "r.jsonl"))
    assert worlds_started("\n".join(result.outlines)) == 1
    assert records["test_state.py::test_changes_every_flag"]["outcome"] == "passed"
    assert records["test_state.py::test_sees_the_defaults"]["outcome"] == "passed", result.outlines


def test_reset_hook_runs_once_per_config_per_rank_and_its_failure_fails_the_config(
    run: tuple[pytest.RunResult, Path, Path],
) -> None:
    result, path, resets = run
    # pytest's own count for a test whose teardown errors after its call passed.
    result.assert_outcomes(passed=3, errors=1)
    assert "ERROR at teardown of test_reset_hook_fails" in "\n".join(result.outlines)
    names = ["test_changes_every_flag", "test_sees_the_defaults", "test_reset_hook_fails"]
    expected = {f"{rank}-{name}" for rank in (0, 1) for name in names}
    assert {p.name for p in resets.iterdir()} == expected
    assert all(p.read_text() == "reset\n" for p in resets.iterdir())
    failed = by_nodeid(results(path / "r.jsonl"))["test_state.py::test_reset_hook_fails"]
    assert failed["outcome"] == "error"
    assert "library state would not reset" in failed["rank_errors"][0]["detail"]


def test_config_state_puts_back_a_flag_changed_in_process() -> None:
    import torch

    with ConfigState("x.py::t"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_default_device("meta")
    assert torch.get_float32_matmul_precision() == "highest"
    assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.empty(1).device.type == "cpu"
