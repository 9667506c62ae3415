"""The training example's command line, in process (cp 1; cp 2 runs in the loss-compare tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.cp.train_example import main
from cpci.loss import read_losses


def test_cp1_writes_a_log_loss_compare_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CPCI_STEPS", "3")
    assert main(["--out", str(tmp_path / "cp1.log")]) == 0
    losses = read_losses(tmp_path / "cp1.log")
    assert list(losses) == [1, 2, 3]
    assert losses[3] < losses[1]


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--cp", "3"], {}, "--cp 3: the 32 tokens must split into 2 x cp equal head-tail"),
        (["--steps", "0"], {}, "--steps and --cp must be >= 1, got 0 and 1"),
        (["--cp", "4"], {"RANK": "0", "WORLD_SIZE": "2"}, "--cp 4 under torchrun of 2 ranks"),
    ],
)
def test_usage_errors(
    argv: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_steps_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_STEPS", "five")
    with pytest.raises(SystemExit, match="CPCI_STEPS must be a whole number >= 1, got 'five'"):
        main([])
