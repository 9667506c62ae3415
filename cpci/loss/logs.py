"""Per-step losses read from a training log: torchtitan's, plain `step: N loss: X`, or JSON lines.

torchtitan logs through torchrun, so a line looks like
`[rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - \\x1b[31mstep:  1  \\x1b[32mloss:  8.1309`
with ANSI colour codes between each label and its number, and several ranks may be interleaved
in one file. Each line is read in time linear in its length: colour codes are removed first
(a regex over disjoint character classes, so it cannot backtrack), the `[rankN]:` prefix is
split off, then one left-to-right scan of `step`/`loss` fields whose every part after the name
is optional, so a field never fails once its name matched and nothing is retried (Python 3.10's
`re` has no possessive quantifiers, and none is needed). A 56 KB line costs milliseconds
(`benchmarks/loss_compare.py`), not the seconds a lazy `.*?` pattern took.

Rules, in order:
- A line is a loss line when it has a `step` field whose value is an integer (`12` or `12/100`)
  and a `loss` field whose value looks like a number (starts with a digit, sign or dot, or is
  `nan`/`inf`). A `loss` field with a word for a value (`loss scaling on`) is not a loss field.
- A value that looks like a number but is not one (`loss: 1.2.3`, `step: 1.5`) is an error
  naming the file and line: a log that cannot be read must not be compared as if it were
  shorter.
- `nan` and `inf` are read as such; a NaN never agrees with anything, so under a check it is
  the first divergence (a training that blew up), never a silent pass.
- A step logged twice keeps its last value (a resumed run logs the steps it redoes again).
- Lines prefixed `[rankN]:` (torchrun `--tee`/`--log-line-prefix-template`) belong to rank N;
  rank 0 is compared unless another is asked for. A log without prefixes is one rank's.
- Validation lines (`validate step: 1 loss: ...`, `eval step ...`) are not training steps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# CSI sequences (colours, cursor moves): ESC [ parameters intermediates final; the three classes
# are disjoint, so the match is deterministic and linear. Else a two-byte escape (ESC @ to _).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_RANK_PREFIX = re.compile(r"\[(?:rank|default)(\d+)\]:")
# A field: its name (optionally quoted, as in a printed dict), `:` or `=`, and a value that ends
# at whitespace or punctuation that never belongs to a number. The parts after the name are
# disjoint or optional, so the first (greedy) way through matches and none is retried.
_FIELD = re.compile(
    r"""(?<![\w.])(step|loss)(?!\w)["']?[ \t]*[:=]?[ \t]*([^\s|,;:=()\[\]{}<>"']*)""",
    re.IGNORECASE,
)
_STEP_VALUE = re.compile(r"(\d+)(?:/\d*)?")
_NOT_TRAINING = frozenset({"validate", "validation", "val", "eval", "evaluation"})


class LossFileError(ValueError):
    """A log that cannot be read as losses; the message names the file and what is wrong."""


@dataclass(frozen=True)
class LossLine:
    """What one log line says: the rank that wrote it (None: no prefix), its step and loss."""

    rank: int | None
    step: int
    loss: float


def strip_ansi(line: str) -> str:
    """`line` without terminal escape sequences (colours)."""
    return _ANSI.sub("", line) if "\x1b" in line else line


def split_rank(line: str) -> tuple[int | None, str]:
    """(N, rest) for a line that starts `[rankN]:` (or torchrun's older `[defaultN]:`)."""
    match = _RANK_PREFIX.match(line)
    if match is None:
        return None, line
    return int(match[1]), line[match.end() :]


def parse_number(text: str) -> float | None:
    """The float `text` spells, or None where it is not one (`1.2.3`, `1_000`, empty)."""
    if not text or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _looks_numeric(text: str) -> bool:
    return bool(text) and (text[0] in "0123456789+-." or text[:3].lower() in ("nan", "inf"))


def parse_line(line: str, where: str, pattern: re.Pattern[str] | None = None) -> LossLine | None:
    """The step and loss of one raw log line, None for any other line.

    `pattern` (named groups `step` and `loss`) replaces the built-in scan, after colours and the
    rank prefix are removed. `where` (`file:line`) names the line in errors.
    """
    rank, text = split_rank(strip_ansi(line))
    if pattern is not None:
        match = pattern.search(text)
        if match is None:
            return None
        return LossLine(rank, _step(match["step"], where), _loss(match["loss"], where))
    step: int | None = None
    bad_step: str | None = None
    loss_text: str | None = None
    for field in _FIELD.finditer(text):
        name, value = field[1].lower(), field[2]
        if name == "step" and step is None:
            before = text[max(0, field.start() - 24) : field.start()].split()
            if before and before[-1].lower().strip("[]():") in _NOT_TRAINING:
                return None
            if (number := _STEP_VALUE.fullmatch(value)) is not None:
                step = int(number[1])
            elif bad_step is None and _looks_numeric(value):
                bad_step = value
        elif name == "loss" and loss_text is None and _looks_numeric(value):
            loss_text = value
    if loss_text is None:
        return None
    if step is None:
        if bad_step is not None:
            raise LossFileError(f"{where}: step {bad_step[:40]!r} is not a whole number")
        return None
    return LossLine(rank, step, _loss(loss_text, where))


def _step(text: str, where: str) -> int:
    if not text.isdigit():
        raise LossFileError(f"{where}: step {text[:40]!r} is not a whole number")
    return int(text)


def _loss(text: str, where: str) -> float:
    value = parse_number(text)
    if value is None:
        raise LossFileError(f"{where}: loss {text[:40]!r} is not a number")
    return value


def read_losses(
    path: Path, pattern: str | None = None, *, rank: int | None = None
) -> dict[int, float]:
    """Step -> loss from a JSON-lines file (every non-blank line an object) or a text log.

    `rank` picks the `[rankN]:` lines to read (default: rank 0, or the unprefixed lines of a
    single-process log). `pattern` is a regex with named groups `step` and `loss` for other
    log formats.
    """
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise LossFileError(f"cannot read {path}: {exc.strerror}") from exc
    texts = [line for line in lines if line.strip()]
    if texts and all(line.lstrip().startswith("{") for line in texts):
        return _read_json_lines(path, lines)
    regex = compile_pattern(pattern)
    by_rank: dict[int | None, dict[int, float]] = {}
    for number, line in enumerate(lines, 1):
        parsed = parse_line(line, f"{path}:{number}", regex)
        if parsed is not None:
            by_rank.setdefault(parsed.rank, {})[parsed.step] = parsed.loss
    wanted = rank if rank is not None else 0 if 0 in by_rank else None
    if wanted in by_rank:
        return by_rank[wanted]
    seen = sorted(r for r in by_rank if r is not None)
    if rank is not None and by_rank:
        raise LossFileError(
            f"no losses of rank {rank} in {path}; ranks with losses: "
            f"{', '.join(map(str, seen)) or 'none (no [rankN]: prefixes)'}"
        )
    if seen:
        raise LossFileError(
            f"no losses of rank 0 in {path}; pick one of ranks {', '.join(map(str, seen))} "
            "with --rank"
        )
    how = f"pattern {pattern!r}" if pattern else "lines like 'step: N ... loss: X'"
    raise LossFileError(f"no losses found in {path} (looked for {how})")


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    """`pattern` compiled (case-insensitive), or LossFileError saying what is wrong with it."""
    if pattern is None:
        return None
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise LossFileError(f"--pattern {pattern!r} is not a valid regex: {exc}") from exc
    if not {"step", "loss"} <= set(regex.groupindex):
        raise LossFileError(f"--pattern needs named groups 'step' and 'loss', got {pattern!r}")
    return regex


def _read_json_lines(path: Path, lines: list[str]) -> dict[int, float]:
    losses: dict[int, float] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            losses[int(record["step"])] = float(record["loss"])
        except (ValueError, KeyError, TypeError) as exc:
            raise LossFileError(
                f"{path}:{number}: JSON line needs numeric 'step' and 'loss': {exc}"
            ) from exc
    return losses
