"""Two runs' per-step losses side by side: the step table, the first diverging step, a summary.

With no check asked for only a step missing from one run diverges; `exact` compares bit for bit
(the same training on the same kernels must reproduce itself), `rtol`/`atol` allow reordering
(CP changes the summation order: ~1e-7 relative in fp32). NaN never agrees with anything.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple


class StepRow(NamedTuple):
    """One step of the table; a side is None where that run did not log the step."""

    step: int
    baseline: float | None
    test: float | None
    difference: float | None


@dataclass(frozen=True)
class Summary:
    """How far apart the runs are over the steps both logged (finite differences only)."""

    steps: int = 0
    compared: int = 0
    max_abs_diff: float = 0.0
    mean_abs_diff: float = 0.0
    max_rel_diff: float = 0.0


@dataclass
class Comparison:
    """The step table and what it says."""

    rows: list[StepRow]
    checked: str  # "exact", "rtol=..,atol=..", or "none"
    first_divergence: int | None = None
    reason: str = ""
    summary: Summary = field(default_factory=Summary)

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
    rows: list[StepRow] = []
    result = Comparison(rows, checked)
    for step in sorted(set(baseline) | set(test)):
        b, t = baseline.get(step), test.get(step)
        diff = t - b if b is not None and t is not None else None
        rows.append(StepRow(step, b, t, diff))
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
    result.summary = Summary(
        steps=len(rows),
        compared=sum(d is not None for *_, d in rows),
        max_abs_diff=max(diffs, default=0.0),
        mean_abs_diff=sum(diffs) / len(diffs) if diffs else 0.0,
        max_rel_diff=max(rel, default=0.0),
    )
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
        f"{s.compared}/{s.steps} steps compared; max |diff| {s.max_abs_diff:.3g}, "
        f"mean |diff| {s.mean_abs_diff:.3g}, max rel diff {s.max_rel_diff:.3g} "
        f"(check: {comparison.checked})"
    )
    lines.append("OK: the runs agree" if comparison.ok else f"MISMATCH: {comparison.reason}")
    return "\n".join(lines)


def as_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as strict JSON (NaN and infinities become the strings "nan", "inf")."""
    payload = asdict(comparison)
    payload["ok"] = comparison.ok
    payload["rows"] = [
        {name: _json_number(value) for name, value in row._asdict().items()}
        for row in comparison.rows
    ]
    return payload


def _json_number(x: float | None) -> float | str | None:
    return x if x is None or math.isfinite(x) else str(x)
