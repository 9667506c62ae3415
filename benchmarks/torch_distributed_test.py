"""torch's own distributed_test.py, stock and under `--cpci-testcases=shared`, side by side.

The torch wheel ships `torch/testing/_internal/distributed/distributed_test.py`; PyTorch runs it
from a ten-line file (`test/distributed/test_distributed_spawn.py`) whose class mixes
`TestDistBackend` into `DistributedTest._DistTestBase` and spawns a fresh world in every `setUp`.
This script writes that file, runs the same selection of its tests twice in one invocation, on
gloo with WORLD_SIZE=2:

- stock: plain pytest (cpci's plugin disabled), each test spawning its own processes;
- cpci: the same file with `--cpci-testcases=shared` (each test a config in a shared world).

It compares every test's outcome (passed / skipped / failed, from each run's JUnit XML), prints
both wall times and their ratio, and exits 1 if any outcome differs.

    python benchmarks/torch_distributed_test.py [-k EXPR] [--world-size 2]

The default `-k` selects 58 tests (all_reduce, broadcast, barrier, get_rank and scatter families,
plus test_ddp_has_finalized, which keeps its own spawn); the whole file is 285 tests, about 20
minutes stock on a small machine. Needs `expecttest` (torch.testing._internal imports it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

SPAWN_FILE = """
import torch
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()
"""

DEFAULT_SELECTION = (
    "test_all_reduce or test_broadcast or test_barrier or test_get_rank or test_scatter "
    "or test_ddp_has_finalized"
)

#: mode -> pytest arguments
MODES = {
    "stock": ["-p", "no:cpci"],
    "cpci": ["--cpci-testcases=shared"],
}


def run(path: Path, mode: str, selection: str, world_size: int) -> tuple[float, dict[str, str]]:
    """Wall seconds and each test's outcome for one way of running the file."""
    junit = path / f"{mode}.xml"
    temp_dir = path / f"temp-{mode}"
    temp_dir.mkdir()
    env = {
        **os.environ,
        "BACKEND": "gloo",
        "WORLD_SIZE": str(world_size),
        "TEMP_DIR": str(temp_dir),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-W", "ignore::DeprecationWarning", "-W", "ignore::FutureWarning"]
    command += [*MODES[mode], "-k", selection, f"--junitxml={junit}", "test_distributed_spawn.py"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=path, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if not junit.exists():
        sys.exit(f"{mode}: pytest wrote no JUnit XML (exit {done.returncode}):\n{done.stdout}")
    summary = [line for line in done.stdout.splitlines() if line.strip()][-1:]
    print(f"  {mode}: {' '.join(summary)}")
    return wall, outcomes(junit)


def outcomes(junit: Path) -> dict[str, str]:
    """`test name -> passed|skipped|failed` from a JUnit XML file (errors count as failed)."""
    found: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "skipped"
        else:
            outcome = "passed"
        found[case.attrib["name"]] = outcome
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="selection", default=DEFAULT_SELECTION)
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory(prefix="cpci-bench-dist-") as tmp:
        path = Path(tmp)
        (path / "test_distributed_spawn.py").write_text(SPAWN_FILE)
        print(f"distributed_test.py, gloo, WORLD_SIZE={args.world_size}, -k {args.selection!r}")
        walls: dict[str, float] = {}
        seen: dict[str, dict[str, str]] = {}
        for mode in MODES:
            walls[mode], seen[mode] = run(path, mode, args.selection, args.world_size)
    stock, cpci = seen["stock"], seen["cpci"]
    differ = sorted(n for n in stock.keys() | cpci.keys() if stock.get(n) != cpci.get(n))
    counts = {o: sum(1 for v in stock.values() if v == o) for o in ("passed", "skipped", "failed")}
    print(f"tests: {len(stock)} ({', '.join(f'{n} {o}' for o, n in counts.items())})")
    for mode, wall in walls.items():
        print(f"{mode:>6}: {wall:7.1f} s wall, {wall / max(len(seen[mode]), 1):5.2f} s per test")
    print(f"speed-up: {walls['stock'] / walls['cpci']:.1f}x")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if differ:
        print(f"{len(differ)} outcome(s) differ:")
        for name in differ:
            print(f"  {name}: stock {stock.get(name)}, cpci {cpci.get(name)}")
        return 1
    print("same outcome for every test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
