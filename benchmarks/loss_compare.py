"""Reading a log line is linear in its length: the old lazy pattern against today's scan.

The pattern `cpci loss-compare` had before issue 14 (`step ... .*? ... loss`) rescans the rest
of the line from every `step` it sees, so a line of many `step:` fields and no loss costs
O(n^2): 18.6 s for 56 KB. `cpci.loss.logs.parse_line` strips colours, then scans once. This
prints, for growing line sizes, the time per line of each and the ratio between doublings
(~4 for quadratic, ~2 for linear). The old pattern only runs up to `--old-max-kb` (it is slow).

    python benchmarks/loss_compare.py [--sizes-kb 7 14 28 56 112] [--old-max-kb 14]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable

from cpci.loss.logs import parse_line

OLD_NUMBER = r"[-+]?(?:nan|inf|[0-9.]+(?:[eE][-+]?\d+)?)"
OLD_PATTERN = re.compile(
    rf"step\s*[:=]?\s*(?P<step>\d+)\b.*?\bloss\s*[:=]?\s*(?P<loss>{OLD_NUMBER})", re.IGNORECASE
)


def decoy_line(kb: int) -> str:
    """`kb` KB of `step: 1` fields with no loss (the worst case), coloured like torchtitan's."""
    field = "\x1b[31mstep: 1 \x1b[39m"
    return "[rank0]:[titan] " + field * (kb * 1000 // len(field))


def seconds(fn: Callable[[str], object], line: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(line)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-kb", type=int, nargs="+", default=[7, 14, 28, 56, 112])
    parser.add_argument("--old-max-kb", type=int, default=14)
    args = parser.parse_args()
    print(f"{'line KB':>8}  {'scan ms':>10}  {'x prev':>7}  {'old pattern ms':>15}  {'x prev':>7}")
    prev_new = prev_old = None
    for kb in args.sizes_kb:
        line = decoy_line(kb)
        new = seconds(lambda text: parse_line(text, "bench:1"), line, repeat=5)
        old = (
            seconds(OLD_PATTERN.search, re.sub(r"\x1b\[[0-9;]*m", "", line), repeat=1)
            if kb <= args.old_max_kb
            else None
        )
        new_x = f"{new / prev_new:.1f}" if prev_new else "-"
        old_x = f"{old / prev_old:.1f}" if old is not None and prev_old else "-"
        old_ms = f"{old * 1e3:.1f}" if old is not None else "(skipped)"
        print(f"{kb:>8}  {new * 1e3:>10.2f}  {new_x:>7}  {old_ms:>15}  {old_x:>7}")
        prev_new, prev_old = new, old


if __name__ == "__main__":
    main()
