"""`benchmarks/compact.py` at a small size on SQLite: it runs, compacts the old days' results
into one row per config and day, and a second compaction finds nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"^sqlite\s+(?P<results>\d+) results .*: +(?P<before>[\d.]+) B/result before, +"
    r"(?P<after>[\d.]+) after \((?P<compacted>\d+) compacted into (?P<rows>\d+) daily rows, "
    r".*\| rerun: (?P<rerun>\d+) \| load "
)


def test_the_benchmark_compacts_the_old_days_once() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compact.py"),
            *("--engine", "sqlite", "--runs", "9", "--configs", "40", "--per-day", "3"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    found = LINE.match(done.stdout)
    assert found, done.stdout
    assert int(found["results"]) == 9 * 40
    assert int(found["compacted"]) == 6 * 40  # the two old days; the newest stays raw
    assert int(found["rows"]) == 2 * 40  # a row per config and day
    assert int(found["rerun"]) == 0
    assert float(found["before"]) > 0
    assert float(found["after"]) > 0
