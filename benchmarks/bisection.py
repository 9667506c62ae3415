"""The polluter, bisected, in real gloo worlds: one injected polluter among n predecessors.

For each n (8, 64 and 256 by default) a suite of n + 1 world-size-2 configs is written: the n
predecessors do nothing but one of them pollutes (sets a module global, or leaves a key in the
world's c10d store), and the last config fails when it is polluted (reads the global, or finds
the key). The runner (`--cpci-isolate-failures`, one shared world) sees the last
config fail, pass alone, fail again after all its predecessors, and bisects them in fresh worlds.
Printed per case: whether the polluter was named, the replays the search took against its bound
ceil(log2 n) + 2, and the wall time. Several polluter positions per n (first, middle, last, and
one drawn), the kinds taken in turn.

    python benchmarks/bisection.py [--sizes 8 64 256] [--positions 4] [--kinds global store]
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

#: Two kinds of polluter, each as cheap as a config body gets. `global`: the polluter sets a
#: module global the victim reads. `store`: the polluter leaves a key in the default process
#: group's c10d store (the world's, which outlives the config; cpci puts back torch's own
#: settings and destroys the config's groups, not what a store holds), and the victim, which
#: asks the store for it, fails to find it missing.
POLLUTERS = {
    "global": (
        'STATE["polluted"] = True  # outlives the config in a shared world',
        'assert not STATE["polluted"], "polluted by an earlier config"',
    ),
    "store": (
        'c10d._get_default_store().set("cpci-bench-polluted", "1")  # never deleted',
        'assert not c10d._get_default_store().check(["cpci-bench-polluted"]), "store polluted"',
    ),
}

SUITE = """
import pytest
import torch.distributed.distributed_c10d as c10d

STATE = {{"polluted": False}}


@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range({n}))
def test_pred(cpci_dist, i):
    if i == {polluter}:
        {pollute}


@pytest.mark.cpci(world_size=2)
def test_victim(cpci_dist):
    {check}
"""


@dataclass(frozen=True)
class Case:
    n: int
    polluter: int
    kind: str
    named: list[str]
    replays: int
    bound: int
    wall_s: float

    @property
    def found(self) -> bool:
        return self.named == [predecessor(self.polluter)]


def predecessor(i: int) -> str:
    return f"test_bisect.py::test_pred[{i}]"


def suite(n: int, polluter: int, kind: str = "global") -> str:
    """The suite's source: `n` predecessors, the one at `polluter` polluting as `kind` says."""
    pollute, check = POLLUTERS[kind]
    return SUITE.format(n=n, polluter=polluter, pollute=pollute, check=check)


def run_case(folder: Path, n: int, polluter: int, kind: str) -> Case:
    """Run the suite in `folder` under pytest with the runner, and read what it named."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_bisect.py").write_text(suite(n, polluter, kind))
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
    return Case(n, polluter, kind, found["polluters"], found["replays"], bound, wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--positions", type=int, default=4, help="polluter positions per size")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=sorted(POLLUTERS),
        default=["global", "store"],
        help="polluter kinds, taken in turn over the positions",
    )
    args = parser.parse_args()
    draw = random.Random(args.seed)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    print(
        f"{'n':>5} {'polluter':>8} {'kind':>6} {'named':>6} {'replays':>7} {'bound':>5} "
        f"{'wall s':>7}"
    )
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="cpci-bisect-") as scratch:
        for n in args.sizes:
            positions = [0, n // 2, n - 1, draw.randrange(n)][: args.positions]
            for k, polluter in enumerate(positions):
                kind = args.kinds[k % len(args.kinds)]
                case = run_case(Path(scratch) / f"n{n}-{k}", n, polluter, kind)
                cases.append(case)
                print(
                    f"{n:>5} {polluter:>8} {kind:>6} {'yes' if case.found else 'NO':>6} "
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
