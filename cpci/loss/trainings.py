"""Run a training command and keep its log, for `cpci loss-compare --baseline-cmd/--test-cmd`.

torchtitan's loss compare runs the baseline and the test training itself; so does this. A
command is split like a shell would split it (`shlex`), but runs without a shell: no globbing,
no pipes, no `$VAR` expansion, so a command taken from CI configuration cannot smuggle in a
second one. The step count reaches the training two ways: `{steps}` in the command is replaced
by it, and the environment variable `CPCI_STEPS` holds it. stdout and stderr go to one log file
in the output folder, which is kept for inspection; that file is what the losses are read from.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

STEPS_ENV = "CPCI_STEPS"
STEPS_PLACEHOLDER = "{steps}"
TAIL_LINES = 20


class TrainingError(RuntimeError):
    """A training that could not start or exited non-zero; the message quotes its log's tail."""


@dataclass(frozen=True)
class Training:
    """One training to run: its name (`baseline` or `test`, also the log's name) and its command,
    given as the flags it came from, in order (`--baseline-cmd`, or `--train-cmd` and then
    `--baseline-options`), so an error names the flag to fix."""

    name: str
    parts: tuple[tuple[str, str], ...]

    def log_in(self, folder: Path) -> Path:
        """Where its output is kept in `folder`."""
        return folder / f"{self.name}.log"

    def argv(self, steps: int | None) -> list[str]:
        """The command split into arguments, with `{steps}` filled in."""
        argv: list[str] = []
        for flag, text in self.parts:
            try:
                words = shlex.split(text)
            except ValueError as exc:
                raise TrainingError(f"{flag} {text!r}: {exc}") from exc
            if STEPS_PLACEHOLDER in text and steps is None:
                raise TrainingError(f"{flag} uses {STEPS_PLACEHOLDER} but no --steps was given")
            argv += words
        if not argv:
            raise TrainingError(f"{self.parts[0][0]} is empty")
        if steps is None:
            return argv
        return [arg.replace(STEPS_PLACEHOLDER, str(steps)) for arg in argv]

    @property
    def command(self) -> str:
        """The command as given, for messages."""
        return " ".join(text for _, text in self.parts if text)


def run_training(
    training: Training, folder: Path, *, steps: int | None, timeout: float | None = None
) -> Path:
    """Run `training` to completion, its output in `folder/<name>.log`; returns that path.

    Raises TrainingError when the command cannot start, times out or exits non-zero. The
    training runs in its own session: on a timeout (or Ctrl-C) all its processes are killed.
    """
    argv = training.argv(steps)
    log = training.log_in(folder)
    env = dict(os.environ)
    if steps is not None:
        env[STEPS_ENV] = str(steps)
    try:
        # Never through a link planted in a shared folder: it would aim our writes elsewhere.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(log, flags, 0o644)
    except OSError as exc:
        raise TrainingError(f"cannot write {log}: {exc.strerror} (is it a link?)") from exc
    try:
        with open(fd, "wb") as out:
            returncode = _run(argv, out, env, timeout)
    except FileNotFoundError as exc:
        raise TrainingError(
            f"the {training.name} training cannot start: {argv[0]!r} not found "
            f"({training.parts[0][0]} {training.command!r})"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise TrainingError(
            f"the {training.name} training ran past {exc.timeout:g} s and was stopped, "
            f"with every process it started\n{log_tail(log)}"
        ) from exc
    if returncode != 0:
        raise TrainingError(
            f"the {training.name} training exited with status {returncode} "
            f"({shlex.join(argv)}); fix it, then rerun\n{log_tail(log)}"
        )
    return log


def _run(argv: list[str], out: IO[bytes], env: dict[str, str], timeout: float | None) -> int:
    """Run to the end, then kill what is left of its process group (also on a timeout or an
    interrupt), so no rank a launcher (torchrun, mp.spawn) started outlives it holding GPUs and
    ports into the next training."""
    process = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        return process.wait(timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def log_tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of `log`, headed by its path, for an error message."""
    with log.open(errors="replace") as text:
        tail = deque(text, maxlen=lines)
    body = "".join(tail).rstrip("\n") or "(the log is empty)"
    return f"last {len(tail)} lines of {log}:\n{body}"
