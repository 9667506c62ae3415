"""`cpci loss-compare`: compare per-step training losses of two runs.

The usual question after a CP change: does the CP=2 run train like the CP=1 run? Either give
two logs (`cpci loss-compare BASELINE TEST`), or two training commands and let cpci run them
(`--baseline-cmd CMD --test-cmd CMD [--steps N] [--output-folder DIR]`, or one `--train-cmd`
with `--baseline-options`/`--test-options`), as torchtitan's loss compare does. Logs are
torchtitan's (colours, `[rankN]:` prefixes), plain `step: N loss: X` lines, JSON lines with
`step` and `loss`, or any format a `--pattern` regex reads (see `cpci.loss.logs` for the rules).
Exit status: 0 when the runs agree (or no check was asked for), 1 at the first diverging step,
2 on a usage error, an unreadable log or a failed training.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from cpci.loss import (
    LossFileError,
    Training,
    TrainingError,
    as_json,
    compare_losses,
    format_table,
    read_losses,
    run_training,
)
from cpci.loss.logs import compile_pattern
from cpci.loss.trainings import STEPS_ENV, STEPS_PLACEHOLDER

__all__ = ["register", "run"]


class UsageError(ValueError):
    """Arguments that do not make a comparison; the message says which and what to do."""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "loss-compare",
        help="compare per-step losses of two training runs (logs, or commands to run)",
        description="Prints a step table and summary; exit 1 at the first diverging step, "
        "2 on a usage error, an unreadable log or a failed training.",
    )
    parser.add_argument(
        "baseline", type=Path, nargs="?", help="log or JSON-lines file of the baseline run"
    )
    parser.add_argument(
        "test", type=Path, nargs="?", help="log or JSON-lines file of the run under test"
    )
    runs = parser.add_argument_group("run the trainings (instead of giving two logs)")
    runs.add_argument("--baseline-cmd", metavar="CMD", help="the baseline training command")
    runs.add_argument("--test-cmd", metavar="CMD", help="the training command under test")
    runs.add_argument(
        "--train-cmd",
        metavar="CMD",
        help="one command for both, as torchtitan's loss compare takes it; each run appends "
        "its --baseline-options / --test-options (neither: the same training twice, a "
        "determinism check)",
    )
    runs.add_argument("--baseline-options", metavar="OPTS", default="", help="see --train-cmd")
    runs.add_argument("--test-options", metavar="OPTS", default="", help="see --train-cmd")
    runs.add_argument(
        "--steps",
        type=int,
        help=f"steps to train: replaces {STEPS_PLACEHOLDER} in the commands and is set as "
        f"{STEPS_ENV} in their environment",
    )
    runs.add_argument(
        "--output-folder",
        type=Path,
        help="where the two logs (baseline.log, test.log) are kept (default: a new temp dir)",
    )
    runs.add_argument(
        "--train-timeout", type=float, metavar="S", help="stop a training after S seconds"
    )
    parser.add_argument(
        "--pattern",
        help="regex with named groups 'step' and 'loss' for other text log formats "
        "(default: torchtitan's and 'step: N ... loss: X' lines)",
    )
    parser.add_argument(
        "--rank",
        type=int,
        help="compare the lines of this rank ([rankN]: prefixes); default rank 0",
    )
    parser.add_argument("--assert-equal", action="store_true", help="losses must match exactly")
    parser.add_argument("--rtol", type=float, help="relative tolerance |t-b| <= atol + rtol*|b|")
    parser.add_argument("--atol", type=float, help="absolute tolerance")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        _check(args)
        baseline_log, test_log = _logs(args)
        baseline = read_losses(baseline_log, args.pattern, rank=args.rank)
        test = read_losses(test_log, args.pattern, rank=args.rank)
    except (UsageError, LossFileError, TrainingError) as exc:
        print(f"cpci loss-compare: {exc}", file=sys.stderr)
        return 2
    comparison = compare_losses(
        baseline, test, exact=args.assert_equal, rtol=args.rtol, atol=args.atol
    )
    if args.json:
        payload = as_json(comparison)
        payload["logs"] = {"baseline": str(baseline_log), "test": str(test_log)}
        print(json.dumps(payload))
    else:
        print(format_table(comparison))
    return 0 if comparison.ok else 1


def _check(args: argparse.Namespace) -> None:
    if args.assert_equal and (args.rtol is not None or args.atol is not None):
        raise UsageError("--assert-equal excludes --rtol/--atol")
    for name in ("rtol", "atol", "train_timeout"):
        value = getattr(args, name)
        if value is not None and not value >= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
    compile_pattern(args.pattern)
    if args.rank is not None and args.rank < 0:
        raise UsageError(f"--rank must be >= 0, got {args.rank}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    commands = args.baseline_cmd is not None, args.test_cmd is not None
    files = args.baseline is not None, args.test is not None
    shared = args.train_cmd is not None
    if (args.baseline_options or args.test_options) and not shared:
        raise UsageError("--baseline-options and --test-options need --train-cmd")
    if shared and any(commands):
        raise UsageError("--train-cmd replaces --baseline-cmd/--test-cmd: give one or the other")
    if (any(commands) or shared) and any(files):
        raise UsageError("give two logs or trainings to run, not both")
    if any(commands) and not all(commands):
        missing = "--test-cmd" if args.test_cmd is None else "--baseline-cmd"
        raise UsageError(f"{missing} is missing: the run mode needs both commands")
    if not any(commands) and not shared and not all(files):
        raise UsageError(
            "give two logs (cpci loss-compare BASELINE TEST) or two trainings to run "
            "(--baseline-cmd CMD --test-cmd CMD, or --train-cmd CMD with --baseline-options "
            "and --test-options)"
        )
    if not (any(commands) or shared) and (args.steps is not None or args.output_folder):
        raise UsageError("--steps and --output-folder only apply when cpci runs the trainings")


def _trainings(args: argparse.Namespace) -> tuple[Training, Training] | None:
    """The two trainings the arguments ask to run, or None when they give two logs."""
    if args.train_cmd is not None:
        return (
            Training(
                "baseline",
                (("--train-cmd", args.train_cmd), ("--baseline-options", args.baseline_options)),
            ),
            Training(
                "test", (("--train-cmd", args.train_cmd), ("--test-options", args.test_options))
            ),
        )
    if args.baseline_cmd is None:
        return None
    return (
        Training("baseline", (("--baseline-cmd", args.baseline_cmd),)),
        Training("test", (("--test-cmd", args.test_cmd),)),
    )


def _logs(args: argparse.Namespace) -> tuple[Path, Path]:
    """The two logs to compare: the files given, or those of the trainings, run one by one."""
    trainings = _trainings(args)
    if trainings is None:
        return args.baseline, args.test
    folder: Path = args.output_folder or Path(tempfile.mkdtemp(prefix="cpci-loss-compare-"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--output-folder {folder}: {exc.strerror}") from exc
    for training in trainings:  # fail on a bad command before spending a training on the other
        training.argv(args.steps)
    logs = []
    for training in trainings:
        log = training.log_in(folder)
        print(
            f"cpci loss-compare: running the {training.name} training (log: {log})", file=sys.stderr
        )
        logs.append(run_training(training, folder, steps=args.steps, timeout=args.train_timeout))
    print(f"cpci loss-compare: logs in {folder}", file=sys.stderr)
    return logs[0], logs[1]
