"""API fuzzing at full size: schemathesis cases over every operation of the service's OpenAPI
schema (positive and negative), checking no 5xx and schema-conformant responses. Prints cases
run per operation, statuses seen, and any failure.

    python benchmarks/reliability_fuzz.py [--examples 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability, shared

from tests.reliability.fuzz import fuzz, fuzz_app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="per operation and mode")
    parser.add_argument("--seed", type=int, default=0, help="0: derandomized")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app, token = fuzz_app(Path(tmp))
        start = time.perf_counter()
        report = fuzz(app, token, max_examples=args.examples, seed=args.seed)
        wall = time.perf_counter() - start
    for operation, count in sorted(report.cases.items()):
        print(f"{count:6d}  {operation}")
    print(f"fuzz cases run: {report.total} in {wall:.1f} s")
    print(f"statuses: {dict(sorted(report.statuses.items()))}")
    print(f"new failures: {len(report.failures)}")
    for example in report.failures.values():
        print("----\n" + example)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
