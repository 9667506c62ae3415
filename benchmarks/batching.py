"""Batched worlds vs one world per config, measured side by side in one invocation.

Runs the same 32 small world-size-2 configs (a few ms of real work each: a matmul and an
all_reduce) through pytest twice: with --cpci-batch-size 1 (one torchrun world per config, the
old way) and with --cpci-batch-size 16. Prints both wall times, their ratio, and the per-config
overhead inside a warm world (a config's recorded duration minus its body's own time).

    python benchmarks/batching.py [--configs 32] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUITE = """
import time
import pytest
import torch
import torch.distributed as dist

@pytest.mark.cpci(world_size=2)
@pytest.mark.parametrize("i", range({configs}))
def test_small(i, cpci_dist):
    start = time.perf_counter()
    a = torch.randn(128, 128)
    b = a @ a.T
    dist.all_reduce(b)
    assert torch.isfinite(b).all()
    cpci_dist.record_metric("body_s", time.perf_counter() - start)
"""


def run(path: Path, batch_size: int) -> tuple[float, list[dict[str, Any]]]:
    results = path / f"results-{batch_size}.jsonl"
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--cpci-batch-size={batch_size}",
            f"--cpci-results={results}",
            "test_bench.py",
        ],
        cwd=path,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"batch size {batch_size} run failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, [json.loads(line) for line in results.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "test_bench.py").write_text(SUITE.replace("{configs}", str(args.configs)))
        print(f"{args.configs} world-size-2 configs on gloo/CPU")
        one_wall, _ = run(path, 1)
        print(f"  batch size 1:  {one_wall:7.1f} s wall ({args.configs} worlds)")
        batched_wall, records = run(path, args.batch_size)
        worlds = -(-args.configs // args.batch_size)
        print(f"  batch size {args.batch_size}: {batched_wall:7.1f} s wall ({worlds} worlds)")
    overheads = [r["duration_s"] - r["metrics"]["body_s"] for r in records]
    bodies = [r["metrics"]["body_s"] for r in records]
    print(f"  speed-up: {one_wall / batched_wall:.1f}x (target >= 8x)")
    print(
        f"  per-config overhead in a warm world: mean {statistics.mean(overheads) * 1e3:.1f} ms, "
        f"median {statistics.median(overheads) * 1e3:.1f} ms, max {max(overheads) * 1e3:.1f} ms "
        f"(target <= 30 ms); config body median {statistics.median(bodies) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
