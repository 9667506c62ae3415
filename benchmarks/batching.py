"""How configs get worlds, measured side by side in one invocation.

Runs the same suites through pytest in four ways:
- `torchrun per config`: `--cpci-batch-size 1 --cpci-launcher torchrun` (a fresh world each);
- `chunk-16 worlds`: `--cpci-batch-size 16 --cpci-launcher torchrun` (the old default);
- `pool`: `--cpci-launcher torchrun`, no cap (one long-lived world per world size);
- `pool + forked ranks`: the defaults (ranks forked from a preloaded interpreter).

Two suites: 32 small world-size-2 configs (a matmul and an all_reduce each), and a
TransformerEngine-shaped file of 648 configs over world sizes 2 and 4, half skipped in the body
(`benchmarks/te_suite.py`). For each run it prints the wall time, the number of worlds, world
start-up (the first world, and the median of the later ones), the per-config overhead inside a
warm world (a config's recorded duration minus its body's own time) and the wall time against
the sum of config durations; then the ratios against one torchrun per config.

    python benchmarks/batching.py [--configs 32] [--suites small,te] [--modes all] [--repeat 5]

The TE-shaped suite is slow in the first two modes (minutes); `--modes pool,fork` skips them.
Every mode runs with pytest's plugin autoload off and cpci's plugin named (`--autoload` to keep
whatever is installed): a dev venv's plugins (hypothesis, schemathesis, ...) cost seconds in
every process, which would measure them rather than cpci.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from te_suite import TE_SUITE  # next to this file; benchmarks/ is not a package

SMALL_SUITE = """
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
    if dist.get_rank() == 0:  # rank 0's own body, inside rank 0's recorded duration
        cpci_dist.record_metric("body_s", time.perf_counter() - start)
"""

#: mode name -> (label, extra pytest arguments)
MODES: dict[str, tuple[str, list[str]]] = {
    "per-config": ("torchrun per config", ["--cpci-batch-size=1", "--cpci-launcher=torchrun"]),
    "chunk16": ("chunk-16 worlds", ["--cpci-batch-size=16", "--cpci-launcher=torchrun"]),
    "pool": ("pool", ["--cpci-launcher=torchrun"]),
    "fork": ("pool + forked ranks", []),
    "fork-per-config": ("forked ranks per config", ["--cpci-batch-size=1"]),
}


@dataclass(frozen=True)
class Measured:
    wall_s: float
    worlds: int
    first_start_s: float
    later_start_s: float | None
    overhead_ms: float | None
    config_sum_s: float
    ran: int
    skipped: int


def run(path: Path, test_file: str, mode: str, autoload: bool) -> Measured:
    results = path / f"results-{test_file}-{mode}.jsonl"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = dict(os.environ)
    if not autoload:  # cpci alone: not the seconds a dev venv's plugins cost every process
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        command += ["-p", "cpci.runner.plugin"]
    command += [*MODES[mode][1], f"--cpci-results={results}", test_file]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=path, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{mode} on {test_file} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    return _measured(wall, records)


def _measured(wall: float, records: list[dict[str, Any]]) -> Measured:
    starts: dict[tuple[int, int], float] = {}
    for r in records:
        batch = r.get("batch")
        if batch and batch.get("start_s") is not None:
            starts.setdefault((batch["index"], batch["world"]), batch["start_s"])
    ordered = [starts[k] for k in sorted(starts)]
    ran = [r for r in records if r["outcome"] == "passed"]
    overheads = [r["duration_s"] - r["metrics"]["body_s"] for r in ran if "body_s" in r["metrics"]]
    return Measured(
        wall_s=wall,
        worlds=len(starts),
        first_start_s=ordered[0] if ordered else 0.0,
        later_start_s=statistics.median(ordered[1:]) if len(ordered) > 1 else None,
        overhead_ms=statistics.median(overheads) * 1e3 if overheads else None,
        config_sum_s=sum(r["duration_s"] for r in records),
        ran=len(ran),
        skipped=sum(r["outcome"] == "skipped" for r in records),
    )


def _row(label: str, m: Measured, baseline: Measured | None) -> str:
    later = "-" if m.later_start_s is None else f"{m.later_start_s:.2f}"
    overhead = "-" if m.overhead_ms is None else f"{m.overhead_ms:.1f}"
    ratio = "" if baseline is None else f"{baseline.wall_s / m.wall_s:6.1f}x"
    return (
        f"  {label:<34} {m.wall_s:7.1f} {m.worlds:6d} {m.first_start_s:7.2f} {later:>7} "
        f"{overhead:>8} {m.config_sum_s:7.1f} {m.ran:5d}/{m.skipped:<5d} {ratio}"
    )


#: Modes faster than this are repeated under --repeat (the slow ones are steady enough).
_REPEAT_UNDER_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=32, help="small suite size")
    parser.add_argument("--suites", default="small,te", help="comma list of small, te")
    parser.add_argument(
        "--modes", default="all", help=f"comma list of {', '.join(MODES)}, or all (default)"
    )
    parser.add_argument(
        "--autoload",
        action="store_true",
        help="let pytest autoload every installed plugin in every process (by default only cpci's "
        "plugin loads, so the figures are cpci's and not the installed plugins' import time)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each mode whose first run took under a minute this many times and print the "
        "run of median wall time (a few seconds of wall time is noisy on a shared machine)",
    )
    args = parser.parse_args()
    modes = list(MODES) if args.modes == "all" else args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        sys.exit(f"unknown mode(s) {sorted(unknown)}; choose from {', '.join(MODES)}")
    suites = {
        "small": ("test_small.py", SMALL_SUITE.replace("{configs}", str(args.configs))),
        "te": ("test_te_cp.py", TE_SUITE),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        for name in args.suites.split(","):
            test_file, text = suites[name]
            (path / test_file).write_text(text)
            print(f"\n{name} suite ({test_file}) on gloo/CPU")
            print(
                f"  {'mode':<34} {'wall s':>7} {'worlds':>6} {'first s':>7} {'later s':>7} "
                f"{'ovh ms':>8} {'sum s':>7} {'ran/skipped':>11} vs per-config"
            )
            baseline: Measured | None = None
            for mode in modes:
                measured = run(path, test_file, mode, args.autoload)
                runs = [measured]
                if measured.wall_s < _REPEAT_UNDER_S:
                    runs += [
                        run(path, test_file, mode, args.autoload) for _ in range(args.repeat - 1)
                    ]
                measured = sorted(runs, key=lambda m: m.wall_s)[(len(runs) - 1) // 2]
                label = MODES[mode][0] + (f" (median of {len(runs)})" if len(runs) > 1 else "")
                print(_row(label, measured, baseline), flush=True)
                if mode == "per-config":
                    baseline = measured
    print(
        "\ngoals (issue 13): TE-shaped suite <= 25 s at default settings; a world after the "
        "first <= 0.5 s; >= 50x against one torchrun per config on 32 small configs"
    )


if __name__ == "__main__":
    main()
