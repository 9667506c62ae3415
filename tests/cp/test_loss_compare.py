"""`cpci loss-compare` end to end: a real `python -m cpci` process on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpci.cli.loss_compare import LossFileError, compare_losses, read_losses


def cpci(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpci", "loss-compare", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_log(path: Path, losses: list[float]) -> Path:
    lines = [
        f"[rank0] step: {i + 1} | lr 1e-3 | loss: {x!r} | tps 1234" for i, x in enumerate(losses)
    ]
    path.write_text("\n".join(["starting", *lines, "done"]) + "\n")
    return path


def write_jsonl(path: Path, losses: list[float]) -> Path:
    path.write_text(
        "".join(json.dumps({"step": i + 1, "loss": x}) + "\n" for i, x in enumerate(losses))
    )
    return path


def test_identical_runs_pass_exact(tmp_path: Path) -> None:
    base = write_log(tmp_path / "a.log", [2.5, 2.25, 2.0])
    test = write_jsonl(tmp_path / "b.jsonl", [2.5, 2.25, 2.0])
    result = cpci(base, test, "--assert-equal")
    assert result.returncode == 0, result.stderr
    assert "OK: the runs agree" in result.stdout
    assert "3/3 steps compared" in result.stdout


def test_first_diverging_step_and_exit_1(tmp_path: Path) -> None:
    base = write_log(tmp_path / "a.log", [2.5, 2.25, 2.0, 1.8])
    test = write_log(tmp_path / "b.log", [2.5, 2.2501, 2.1, 1.8])
    exact = cpci(base, test, "--assert-equal")
    assert exact.returncode == 1
    assert "MISMATCH: step 2:" in exact.stdout
    loose = cpci(base, test, "--atol", "1e-3")
    assert loose.returncode == 1
    assert "MISMATCH: step 3:" in loose.stdout
    assert cpci(base, test, "--atol", "0.2").returncode == 0
    assert cpci(base, test).returncode == 0  # no check asked: table only


def test_json_output(tmp_path: Path) -> None:
    base = write_jsonl(tmp_path / "a.jsonl", [1.0, 2.0])
    test = write_jsonl(tmp_path / "b.jsonl", [1.0, 2.5])
    result = cpci(base, test, "--rtol", "0.1", "--json")
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    assert payload["first_divergence"] == 2
    assert payload["rows"][1] == {"step": 2, "baseline": 2.0, "test": 2.5, "difference": 0.5}
    assert payload["summary"]["max_abs_diff"] == 0.5


def test_missing_step_diverges(tmp_path: Path) -> None:
    base = write_jsonl(tmp_path / "a.jsonl", [1.0, 2.0, 3.0])
    test = write_jsonl(tmp_path / "b.jsonl", [1.0, 2.0])
    result = cpci(base, test)
    assert result.returncode == 1
    assert "step 3 only in baseline" in result.stdout


def test_custom_pattern(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("it=1 L=0.5\nit=2 L=0.25\n")
    (tmp_path / "b.log").write_text("it=1 L=0.5\nit=2 L=0.25\n")
    pattern = r"it=(?P<step>\d+) L=(?P<loss>[0-9.]+)"
    result = cpci(tmp_path / "a.log", tmp_path / "b.log", "--pattern", pattern, "--assert-equal")
    assert result.returncode == 0, result.stderr
    assert "2/2 steps compared" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--assert-equal", "--rtol", "0.1"], "--assert-equal excludes --rtol/--atol"),
        (["--atol", "-1"], "--atol must be >= 0, got -1.0"),
        (["--pattern", "step (\\d+)"], "needs named groups 'step' and 'loss'"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    base = write_jsonl(tmp_path / "a.jsonl", [1.0])
    result = cpci(base, base, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("nothing here\n")
    with pytest.raises(LossFileError, match="no losses found"):
        read_losses(tmp_path / "empty.log")
    with pytest.raises(LossFileError, match="cannot read"):
        read_losses(tmp_path / "absent.log")
    (tmp_path / "bad.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(LossFileError, match=r"bad\.jsonl:1: JSON line needs"):
        read_losses(tmp_path / "bad.jsonl")


def test_nan_never_agrees() -> None:
    nan = float("nan")
    assert not compare_losses({1: nan}, {1: nan}, rtol=1.0).ok
    assert compare_losses({1: 1.0}, {1: 1.0 + 1e-9}, rtol=1e-6).ok
