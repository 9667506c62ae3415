"""`cpci loss-compare BASELINE TEST`: compare per-step training losses of two runs.

The usual question after a CP change: does the CP=2 run train like the CP=1 run? Losses are read
from training logs (a regex with named groups `step` and `loss`; the default matches lines like
`step: 12 ... loss: 2.3456`) or from JSON lines with `step` and `loss` keys. Exit status: 0 when
the runs agree (or no check was asked for), 1 at the first diverging step, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_NUMBER = r"[-+]?(?:nan|inf|[0-9.]+(?:[eE][-+]?\d+)?)"
DEFAULT_PATTERN = rf"step\s*[:=]?\s*(?P<step>\d+)\b.*?\bloss\s*[:=]?\s*(?P<loss>{_NUMBER})"


class LossFileError(ValueError):
    """A log that cannot be read as losses; the message names the file and what is wrong."""


def read_losses(path: Path, pattern: str = DEFAULT_PATTERN) -> dict[int, float]:
    """Step -> loss from a JSON-lines file (every non-blank line an object) or a text log.

    A step logged twice keeps its last value (a resumed run logs the steps it redoes again).
    """
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise LossFileError(f"cannot read {path}: {exc.strerror}") from exc
    regex = re.compile(pattern, re.IGNORECASE)
    if not {"step", "loss"} <= set(regex.groupindex):
        raise LossFileError(f"--pattern needs named groups 'step' and 'loss', got {pattern!r}")
    texts = [line for line in lines if line.strip()]
    json_lines = bool(texts) and all(line.lstrip().startswith("{") for line in texts)
    losses: dict[int, float] = {}
    for number, line in enumerate(lines, 1):
        if json_lines and line.strip():
            try:
                record = json.loads(line)
                losses[int(record["step"])] = float(record["loss"])
            except (ValueError, KeyError, TypeError) as exc:
                raise LossFileError(
                    f"{path}:{number}: JSON line needs numeric 'step' and 'loss': {exc}"
                ) from exc
        elif not json_lines and (match := regex.search(line)):
            losses[int(match["step"])] = float(match["loss"])
    if not losses:
        raise LossFileError(f"no losses found in {path} (pattern {pattern!r})")
    return losses


@dataclass
class Comparison:
    """The step table and what it says."""

    rows: list[tuple[int, float | None, float | None, float | None]]
    checked: str  # "exact", "rtol=..,atol=..", or "none"
    first_divergence: int | None = None
    reason: str = ""
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.first_divergence is None


def compare_losses(
    baseline: dict[int, float],
    test: dict[int, float],
    *,
    exact: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """Compare step by step; with no `exact` and no tolerance only a missing step diverges."""
    check = exact or rtol is not None or atol is not None
    rtol_, atol_ = rtol or 0.0, atol or 0.0
    checked = "exact" if exact else f"rtol={rtol_:g},atol={atol_:g}" if check else "none"
    rows: list[tuple[int, float | None, float | None, float | None]] = []
    result = Comparison(rows, checked)
    for step in sorted(set(baseline) | set(test)):
        b, t = baseline.get(step), test.get(step)
        diff = t - b if b is not None and t is not None else None
        rows.append((step, b, t, diff))
        if result.first_divergence is not None:
            continue
        if b is None or t is None:
            result.first_divergence = step
            result.reason = f"step {step} only in {'test' if b is None else 'baseline'}"
        elif check and not _agree(b, t, exact, rtol_, atol_):
            result.first_divergence = step
            result.reason = f"step {step}: baseline {b!r}, test {t!r}, difference {t - b:.6g}"
    diffs = [abs(d) for _, _, _, d in rows if d is not None and math.isfinite(d)]
    rel = [abs(d) / abs(b) for _, b, _, d in rows if d is not None and b and math.isfinite(d)]
    result.summary = {
        "steps": len(rows),
        "compared": sum(d is not None for *_, d in rows),
        "max_abs_diff": max(diffs, default=0.0),
        "mean_abs_diff": sum(diffs) / len(diffs) if diffs else 0.0,
        "max_rel_diff": max(rel, default=0.0),
    }
    return result


def _agree(b: float, t: float, exact: bool, rtol: float, atol: float) -> bool:
    if exact:
        return b == t
    return math.isfinite(b) and math.isfinite(t) and abs(t - b) <= atol + rtol * abs(b)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def format_table(comparison: Comparison) -> str:
    """The step table, a summary line and the verdict, for a terminal."""
    lines = [f"{'step':>8}  {'baseline':>14}  {'test':>14}  {'difference':>12}"]
    for step, b, t, d in comparison.rows:
        mark = "  <-- first divergence" if step == comparison.first_divergence else ""
        lines.append(f"{step:>8}  {_fmt(b):>14}  {_fmt(t):>14}  {_fmt(d):>12}{mark}")
    s = comparison.summary
    lines.append(
        f"{s['compared']}/{s['steps']} steps compared; max |diff| {s['max_abs_diff']:.3g}, "
        f"mean |diff| {s['mean_abs_diff']:.3g}, max rel diff {s['max_rel_diff']:.3g} "
        f"(check: {comparison.checked})"
    )
    lines.append("OK: the runs agree" if comparison.ok else f"MISMATCH: {comparison.reason}")
    return "\n".join(lines)


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "loss-compare",
        help="compare per-step losses of two training runs (logs or JSON lines)",
        description="Prints a step table and summary; exit 1 at the first diverging step.",
    )
    parser.add_argument("baseline", type=Path, help="log or JSON-lines file of the baseline run")
    parser.add_argument("test", type=Path, help="log or JSON-lines file of the run under test")
    parser.add_argument(
        "--pattern",
        default=DEFAULT_PATTERN,
        help="regex with named groups 'step' and 'loss' for text logs "
        "(default matches: step: N ... loss: X)",
    )
    parser.add_argument("--assert-equal", action="store_true", help="losses must match exactly")
    parser.add_argument("--rtol", type=float, help="relative tolerance |t-b| <= atol + rtol*|b|")
    parser.add_argument("--atol", type=float, help="absolute tolerance")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.assert_equal and (args.rtol is not None or args.atol is not None):
        print("cpci loss-compare: --assert-equal excludes --rtol/--atol", file=sys.stderr)
        return 2
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if value is not None and not value >= 0:
            print(f"cpci loss-compare: --{name} must be >= 0, got {value}", file=sys.stderr)
            return 2
    try:
        baseline = read_losses(args.baseline, args.pattern)
        test = read_losses(args.test, args.pattern)
    except (LossFileError, re.error) as exc:
        print(f"cpci loss-compare: {exc}", file=sys.stderr)
        return 2
    comparison = compare_losses(
        baseline, test, exact=args.assert_equal, rtol=args.rtol, atol=args.atol
    )
    if args.json:
        print(json.dumps(as_json(comparison)))
    else:
        print(format_table(comparison))
    return 0 if comparison.ok else 1


def as_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as strict JSON (NaN and infinities become the strings "nan", "inf")."""
    columns = ("step", "baseline", "test", "difference")
    payload = asdict(comparison)
    payload["ok"] = comparison.ok
    payload["rows"] = [
        {c: _json_number(v) for c, v in zip(columns, row, strict=True)} for row in comparison.rows
    ]
    return payload


def _json_number(x: float | None) -> float | str | None:
    return x if x is None or math.isfinite(x) else str(x)
