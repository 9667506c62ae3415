"""Runner chaos at full size: 100 configs, ~20 of them faulting (SIGKILL, segfault, os._exit, hang,
plain failure) on a seeded rank at a seeded point. Prints configs accounted for (each exactly
once, with the outcome its fault implies), outcomes, worlds, orphans, and wall time.

    python benchmarks/reliability_chaos.py [--configs 100] [--faults 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability, shared

from tests.reliability.chaos import run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=100)
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3.0, help="per-config timeout (s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_chaos(
            Path(tmp),
            configs=args.configs,
            faults=args.faults,
            seed=args.seed,
            timeout_s=args.timeout,
            deadline_s=1800,
        )
    kinds = Counter(f.kind for f in run.plan.values())
    worlds = next((ln for ln in run.stdout.splitlines() if "world(s) started" in ln), "?")
    print(f"seed {args.seed}: {args.configs} configs, faults planned {dict(kinds)}")
    print(f"configs accounted for exactly once: {run.accounted}/{args.configs}")
    print(f"outcomes: {dict(run.outcomes)}")
    print(f"results lines validated while running: {run.lines_checked}")
    print(f"orphan processes after the run: {len(run.survivors)}")
    print(f"cpci: {worlds.strip()}")
    print(f"wall {run.wall_s:.1f} s, pytest exit code {run.returncode}")
    for problem in run.problems:
        print(f"PROBLEM: {problem}")
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
