"""`cpci loss-compare` end to end: a real `python -m cpci` process on real files and trainings."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from cpci.loss import LossFileError, compare_losses, read_losses


def cpci(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpci", "loss-compare", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
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


# torchtitan's metrics line, as torchrun --tee writes it: rank prefix, [titan] tag, colours.
RED, GREEN, ORANGE, RESET = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[39m"


def titan_line(step: int, loss: float, *, rank: int | None = 0, colour: bool = True) -> str:
    red, green, orange, reset = (RED, GREEN, ORANGE, RESET) if colour else ("", "", "", "")
    prefix = "" if rank is None else f"[rank{rank}]:"
    return (
        f"{prefix}[titan] 2025-06-01 12:00:{step:02d},123 - root - INFO - {red}step: {step:2}  "
        f"{green}loss: {loss:7.4f}  {orange}grad_norm:  1.2345  memory: 12.34GiB(15.60%)  "
        f"tps: 1,234  tflops: 56.78  mfu: 5.67%{reset}"
    )


def titan_log(path: Path, losses: list[float], **kwargs: Any) -> Path:
    noise = [
        "[rank0]:[titan] 2025-06-01 12:00:00,000 - root - INFO - Training starts at step 1, "
        "with local batch size 8, global batch size 64, sequence length 8192",
        f"[rank0]:[titan] 2025-06-01 12:00:00,001 - root - INFO - {RED}validate step: 1  "
        f"{GREEN}loss: 99.0000{RESET}",
        "[rank0]:[titan] step 3 of warmup, loss scaling on",
    ]
    lines = [titan_line(i + 1, x, **kwargs) for i, x in enumerate(losses)]
    path.write_text("\n".join([*noise, *lines]) + "\n")
    return path


def test_torchtitan_log_with_and_without_colours(tmp_path: Path) -> None:
    coloured = titan_log(tmp_path / "a.log", [8.1309, 7.5, 6.25])
    plain = titan_log(tmp_path / "b.log", [8.1309, 7.5, 6.25], colour=False)
    assert read_losses(coloured) == {1: 8.1309, 2: 7.5, 3: 6.25}  # validation line not a step
    result = cpci(coloured, plain, "--assert-equal")
    assert result.returncode == 0, result.stderr
    assert "3/3 steps compared" in result.stdout


def test_torchtitan_log_against_plain_log(tmp_path: Path) -> None:
    titan = titan_log(tmp_path / "titan.log", [2.5, 2.25], rank=None)
    plain = write_log(tmp_path / "plain.log", [2.5, 2.25])
    result = cpci(titan, plain, "--assert-equal")
    assert result.returncode == 0, result.stderr


def test_interleaved_ranks_compare_rank_0_unless_asked(tmp_path: Path) -> None:
    lines = []
    for step, (r0, r1) in enumerate([(3.0, 3.5), (2.0, 2.5)], 1):
        lines += [titan_line(step, r1, rank=1), titan_line(step, r0, rank=0)]
    both = tmp_path / "both.log"
    both.write_text("\n".join(lines) + "\n")
    assert read_losses(both) == {1: 3.0, 2: 2.0}
    assert read_losses(both, rank=1) == {1: 3.5, 2: 2.5}
    rank0 = titan_log(tmp_path / "r0.log", [3.0, 2.0])
    assert cpci(both, rank0, "--assert-equal").returncode == 0
    rank1 = cpci(both, rank0, "--assert-equal", "--rank", "1")
    assert rank1.returncode == 2  # rank0.log has no rank 1
    assert "no losses of rank 1 in" in rank1.stderr
    assert "ranks with losses: 0" in rank1.stderr


def test_log_of_other_ranks_only_says_to_pick_one(tmp_path: Path) -> None:
    log = titan_log(tmp_path / "r3.log", [1.0], rank=3)
    with pytest.raises(LossFileError, match=r"no losses of rank 0 .* pick one of ranks 3 with"):
        read_losses(log)


@pytest.mark.parametrize("bad", ["1.2.3", "1_000", "-", "2.5e", "nan.5"])
def test_malformed_loss_names_file_and_line(tmp_path: Path, bad: str) -> None:
    log = tmp_path / "a.log"
    log.write_text(f"step: 1 loss: 2.0\n\x1b[31mstep: 2 \x1b[32mloss: {bad}\x1b[0m\n")
    good = write_jsonl(tmp_path / "b.jsonl", [2.0, 2.0])
    result = cpci(log, good)
    assert result.returncode == 2
    assert f"a.log:2: loss {bad!r} is not a number" in result.stderr


def test_malformed_step_names_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("[rank0]:step: 1 loss: 2.0\n[rank0]:step: 1.5 loss: 2.0\n")
    with pytest.raises(LossFileError, match=r"a\.log:2: step '1\.5' is not a whole number"):
        read_losses(log)
    log.write_text("step: one, loss: 2.0\nstep: 2 loss: 2.0\n")  # a word: not a step field
    assert read_losses(log) == {2: 2.0}


def test_nan_and_inf_are_read_and_diverge_under_a_check(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step: 1 loss: 2.0\nstep: 2 loss: nan\nstep: 3 loss: inf\n")
    losses = read_losses(log)
    assert math.isnan(losses[2])
    assert losses[3] == math.inf
    good = write_jsonl(tmp_path / "b.jsonl", [2.0, 2.0, 2.0])
    assert cpci(log, good).returncode == 0  # no check: the table only
    checked = cpci(log, good, "--rtol", "1")
    assert checked.returncode == 1
    assert "MISMATCH: step 2:" in checked.stdout


def test_56kb_lines_are_read_correctly(tmp_path: Path) -> None:
    """The line that took 18.6 s under the old pattern (`benchmarks/loss_compare.py` times it)."""
    decoy = "step: 1 " * 7000  # many step fields and no loss: the quadratic case
    log = tmp_path / "long.log"
    log.write_text(f"{decoy}\nstep: 1 {'x' * 56000} loss: 2.5\n{RED * 8000}step: 2 loss: 1.5\n")
    assert len(decoy) >= 56000
    assert read_losses(log) == {1: 2.5, 2: 1.5}


def run_mode(tmp_path: Path, baseline: str, test: str, *args: str) -> CompletedProcess[str]:
    return cpci(
        "--baseline-cmd",
        baseline,
        "--test-cmd",
        test,
        "--output-folder",
        tmp_path / "out",
        *args,
    )


PY = shlex.quote(sys.executable)
EXAMPLE = f"{PY} -m cpci.cp.train_example"


def test_run_mode_cp2_trains_like_cp1(tmp_path: Path) -> None:
    """The README's example: the bundled training at cp 1 and cp 2 (spawned gloo world)."""
    result = run_mode(
        tmp_path,
        f"{EXAMPLE} --cp 1 --steps {{steps}}",
        f"{EXAMPLE} --cp 2",  # takes the step count from CPCI_STEPS
        "--steps",
        "3",
        "--rtol",
        "1e-5",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3/3 steps compared" in result.stdout
    assert "OK: the runs agree" in result.stdout
    kept = tmp_path / "out"
    assert read_losses(kept / "baseline.log").keys() == {1, 2, 3}
    assert read_losses(kept / "test.log").keys() == {1, 2, 3}


def test_run_mode_diverging_training_exits_1(tmp_path: Path) -> None:
    result = run_mode(
        tmp_path, f"{EXAMPLE} --steps 3", f"{EXAMPLE} --steps 3 --lr 0.4", "--assert-equal"
    )
    assert result.returncode == 1, result.stderr
    # Same init and data: step 1 (before any update) agrees, the learning rate shows at step 2.
    assert "MISMATCH: step 2:" in result.stdout


def test_shared_command_with_options_like_torchtitan(tmp_path: Path) -> None:
    """`--train-cmd` + `--baseline-options`/`--test-options`: torchtitan's loss compare shape."""
    result = cpci(
        "--train-cmd",
        f"{EXAMPLE} --steps {{steps}}",
        "--baseline-options",
        "--lr 0.5",
        "--test-options",
        "--lr 0.4",
        "--steps",
        "2",
        "--output-folder",
        tmp_path,
        "--assert-equal",
    )
    assert result.returncode == 1, result.stderr
    assert "MISMATCH: step 2:" in result.stdout
    same = cpci(
        "--train-cmd", f"{EXAMPLE} --steps 2", "--output-folder", tmp_path, "--assert-equal"
    )
    assert same.returncode == 0, same.stderr  # the same training twice: bit for bit
    assert "2/2 steps compared" in same.stdout


def test_run_mode_passes_steps_by_placeholder_and_env(tmp_path: Path) -> None:
    by_arg = f"{PY} -c 'import sys; print(\"step: 1 loss:\", sys.argv[1])' {{steps}}"
    by_env = f'{PY} -c \'import os; print("step: 1 loss:", os.environ["CPCI_STEPS"])\''
    result = run_mode(tmp_path, by_arg, by_env, "--steps", "7", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["rows"][0] == {"step": 1, "baseline": 7.0, "test": 7.0, "difference": 0.0}
    assert payload["logs"] == {
        "baseline": str(tmp_path / "out" / "baseline.log"),
        "test": str(tmp_path / "out" / "test.log"),
    }


def test_run_mode_failed_training_shows_its_log_tail(tmp_path: Path) -> None:
    ok = f"{PY} -c 'print(\"step: 1 loss: 1.0\")'"
    crash = f'{PY} -c \'print("loading"); print("CUDA error: boom"); raise SystemExit(3)\''
    result = run_mode(tmp_path, ok, crash)
    assert result.returncode == 2
    assert "the test training exited with status 3" in result.stderr
    assert f"last 2 lines of {tmp_path / 'out' / 'test.log'}" in result.stderr
    assert "CUDA error: boom" in result.stderr
    missing = run_mode(tmp_path, ok, "no-such-training-command --steps 1")
    assert missing.returncode == 2
    assert "cannot start: 'no-such-training-command' not found" in missing.stderr


def test_run_mode_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "baseline.log").symlink_to(victim)
    echo = f"{PY} -c 'print(\"step: 1 loss: 1.0\")'"
    result = run_mode(tmp_path, echo, echo)
    assert result.returncode == 2
    assert "cannot write" in result.stderr
    assert victim.read_text() == "keep me\n"


def test_run_mode_runs_no_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    echo = f"{PY} -c 'print(\"step: 1 loss: 1.0\")'"
    result = run_mode(tmp_path, echo, f"{echo} ; touch {marker}")
    assert not marker.exists()  # `;` and `touch` were arguments to python -c, not a command
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline-cmd", "true"], "--test-cmd is missing"),
        (["--baseline-cmd", "x {steps}", "--test-cmd", "y"], "uses {steps} but no --steps"),
        (["--baseline-cmd", "'unclosed", "--test-cmd", "y"], "No closing quotation"),
        (["--steps", "3"], "give two logs (cpci loss-compare BASELINE TEST) or two trainings"),
        (["--baseline-options", "--cp 1"], "--baseline-options and --test-options need"),
        (["--train-cmd", "x", "--test-cmd", "y"], "--train-cmd replaces --baseline-cmd"),
        (["--train-cmd", "x", "--test-options", "'a"], '--test-options "\'a": No closing'),
        (["--baseline-cmd", "x", "--test-cmd", "y", "--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_run_mode_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = cpci(*args)
    assert result.returncode == 2
    assert message in result.stderr


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_run_mode_timeout_kills_the_training_and_its_ranks(tmp_path: Path) -> None:
    """A hung training is stopped with every process it started (a launcher's ranks)."""
    rank = (
        "import os, threading; print('rank pid', os.getpid(), flush=True); threading.Event().wait()"
    )
    launcher = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {rank!r}]).wait()"
    ok = f"{PY} -c 'print(\"step: 1 loss: 1.0\")'"
    result = run_mode(tmp_path, ok, f"{PY} -c {shlex.quote(launcher)}", "--train-timeout", "5")
    assert result.returncode == 2
    assert "the test training ran past 5 s and was stopped" in result.stderr
    log = (tmp_path / "out" / "test.log").read_text()
    assert "rank pid" in log, "the rank did not start within the timeout; the machine is slow"
    pid = int(log.split("rank pid", 1)[1].split()[0])
    assert not _alive(pid), f"rank {pid} outlived its training"


def test_run_mode_leaves_no_straggler_ranks(tmp_path: Path) -> None:
    """A training that exits while a rank it started still runs: the rank is killed too."""
    rank = "import os, threading; print(os.getpid(), flush=True); threading.Event().wait()"
    launcher = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {rank!r}], stdout=subprocess.PIPE); "
        "print('rank pid', p.stdout.readline().decode().strip()); print('step: 1 loss: 1.0')"
    )
    result = run_mode(tmp_path, f"{PY} -c {shlex.quote(launcher)}", f"{PY} -c 'print(1)'")
    log = (tmp_path / "out" / "baseline.log").read_text()
    pid = int(log.split("rank pid", 1)[1].split()[0])
    assert not _alive(pid), f"rank {pid} outlived its training"
    assert result.returncode == 2  # the test "training" logged no losses
    assert "no losses found in" in result.stderr
