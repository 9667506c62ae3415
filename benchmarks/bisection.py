"""The polluter, bisected, in real gloo worlds: one injected polluter among n predecessors.

For each n (8, 64 and 256 by default) a suite of n + 1 world-size-2 configs is written: the n
predecessors do nothing but one of them sets a module global, and the last config fails when it
is set. The runner (`--cpci-isolate-failures`, one shared world) sees the last config fail, pass
alone, fail again after all its predecessors, and bisects them in fresh worlds. Printed per case:
whether the polluter was named, the replays the search took against its bound ceil(log2 n) + 2,
and the wall time. Several polluter positions per n (first, middle, last, and one drawn).

    python benchmarks/bisection.py [--sizes 8 64 256] [--positions 4]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: The cheapest config body a world runs: no collective, one module global.
SUITE = """
import pytest

STATE = {{"polluted": False}}


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range({n}))
def test_pred(cpci_dist, i):
    if i == {polluter}:
        STATE["polluted"] = True  # outlives the config in a shared world


@pytest.mark.cpci(world_size=2)
def test_victim(cpci_dist):
    assert not STATE["polluted"], "polluted by an earlier config"
"""


@dataclass(frozen=True)
class Case:
    n: int
    polluter: int
    named: list[str]
    replays: int
    bound: int
    wall_s: float

    @property
    def found(self) -> bool:
        return self.named == [predecessor(self.polluter)]


def predecessor(i: int) -> str:
    return f"test_bisect.py::test_pred[{i}]"


def suite(n: int, polluter: int) -> str:
    """The suite's source: `n` predecessors, the one at `polluter` setting the global."""
    return SUITE.format(n=n, polluter=polluter)


def run_case(folder: Path, n: int, polluter: int) -> Case:
    """Run the suite in `folder` under pytest with the runner, and read what it named."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_bisect.py").write_text(suite(n, polluter))
    results = folder / "r.jsonl"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "test_bisect.py",
            "--cpci-backend=gloo",
            "--cpci-isolate-failures",
            f"--cpci-results={results}",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    wall = time.monotonic() - started
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    victim = [r for r in records if r["nodeid"].endswith("::test_victim")]
    found = victim[-1].get("order_dependence") if victim else None
    if found is None:
        raise SystemExit(f"n={n}: no order dependence recorded\n{done.stdout[-3000:]}")
    bound = 1 if n == 1 else math.ceil(math.log2(n)) + 2
    return Case(n, polluter, found["polluters"], found["replays"], bound, wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--positions", type=int, default=4, help="polluter positions per size")
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    print(f"{'n':>5} {'polluter':>8} {'named':>6} {'replays':>7} {'bound':>5} {'wall s':>7}")
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="cpci-bisect-") as scratch:
        for n in args.sizes:
            positions = [0, n // 2, n - 1, draw.randrange(n)][: args.positions]
            for k, polluter in enumerate(positions):
                case = run_case(Path(scratch) / f"n{n}-{k}", n, polluter)
                cases.append(case)
                print(
                    f"{n:>5} {polluter:>8} {'yes' if case.found else 'NO':>6} "
                    f"{case.replays:>7} {case.bound:>5} {case.wall_s:>7.1f}",
                    flush=True,
                )
    named = sum(c.found for c in cases)
    within = sum(c.replays <= c.bound for c in cases)
    print(f"named {named}/{len(cases)}; within ceil(log2 n) + 2 replays: {within}/{len(cases)}")
    if named < len(cases) or within < len(cases):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
