"""The porting guide's own TransformerEngine-style suite, stock and ported, timed on this machine.

docs/porting.md's first example is a 12-config suite (nine configs of 2 ranks, three of 4) whose
pytest tests each launch torchrun on a worker script, then the same suite ported to cpci. This
script takes both from the guide itself (`tests/porting_guide.py`: the files before its first
command, then those before its second), runs the guide's command on each in a fresh folder, and
prints the wall times, their ratio, and the machine's load (`os.getloadavg`, as `uptime` shows it)
before and after each run, since a shared machine's load moves the stock figure most.

    python benchmarks/porting.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.porting_guide, shared

from tests.porting_guide import Block, examples, run, write


def stages() -> list[tuple[str, list[Block], Block]]:
    """(label, files, command) for the stock suite and the ported one, in the guide's order."""
    out = []
    files: list[Block] = []
    for block in examples()["te"]:
        if block.kind == "file":
            files.append(block)
        elif block.kind == "shell" and len(out) < 2:
            label = "stock (torchrun per test)" if not out else "ported (cpci)"
            out.append((label, list(files), replace(block, addopts="")))  # the whole suite
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, the median shown")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {}
    for label, files, command in stages():
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="cpci-porting-") as tmp:
                folder = Path(tmp)
                for block in files:
                    write(block, folder)
                before = load()
                start = time.perf_counter()
                ran = run(command, folder)
                wall = time.perf_counter() - start
                if ran.status != 0:
                    print(ran.output)
                    raise SystemExit(f"{label}: exit status {ran.status}")
                walls.setdefault(label, []).append(wall)
                print(f"{label:28} {wall:7.1f} s   load average {before} -> {load()}")
    (stock, stock_s), (ported, ported_s) = ((k, statistics.median(v)) for k, v in walls.items())
    print(f"{stock}: {stock_s:.1f} s, {ported}: {ported_s:.1f} s, {stock_s / ported_s:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
