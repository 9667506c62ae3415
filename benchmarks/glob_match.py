"""Path globs: the segment-wise matcher vs the regular expression it replaced, on the
pathological `**a**a**a**a**b` against paths of growing length.

The old matcher compiled `**` to `.*`, so five of them backtrack polynomially (6.2 s at 200
characters in the review). The segment-wise one counts its steps, which grow linearly.

    python benchmarks/glob_match.py [--lengths 25,50,100,200] [--regex-up-to 100]
"""

from __future__ import annotations

import argparse
import re
import time

from cpci.github.rules import Steps, glob_pattern

PATTERN = "**a**a**a**a**b"


def old_regex(glob: str) -> re.Pattern[str]:
    """The matcher before segment-wise globs: `**` became `.*`."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="25,50,100,200")
    parser.add_argument("--regex-up-to", type=int, default=100, help="skip slower regex sizes")
    args = parser.parse_args()
    glob, regex = glob_pattern(PATTERN), old_regex(PATTERN)
    print(f"{'length':>7} {'segment-wise':>14} {'steps':>7} {'regex':>10} {'ratio':>8}")
    for n in (int(v) for v in args.lengths.split(",")):
        path, steps = "a" * n, Steps()
        start = time.perf_counter()
        assert not glob.fullmatch(path, steps)
        new_s = time.perf_counter() - start
        if n <= args.regex_up_to:
            start = time.perf_counter()
            assert regex.fullmatch(path) is None
            old_s = time.perf_counter() - start
            old, ratio = f"{old_s:.4f} s", f"{old_s / new_s:.0f}x"
        else:
            old, ratio = "(skipped)", "-"
        print(f"{n:>7} {new_s * 1e3:>11.3f} ms {steps.count:>7} {old:>10} {ratio:>8}")


if __name__ == "__main__":
    main()
