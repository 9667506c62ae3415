"""How long `make demo` takes here: the whole demo (service, the history's seven suite runs,
uploads, the PR comment), run as `cpci demo --no-wait`, once per `--jobs` value asked for.

For each run it prints the wall time, the demo's own total (from its last line), each job's
time and the load average before and after: the demo is CPU-bound, so a machine shared with
other work stretches it, and the load says by how much.

    python benchmarks/demo.py [--jobs 2] [--jobs 1]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB_LINE = re.compile(r"\] +[\d.]+ s  (?P<job>.+ shard \d/\d): .* in (?P<s>\d+) s; uploaded")
DONE_LINE = re.compile(r"done in (?P<s>\d+) s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(jobs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "cpci", "demo", "--no-wait", "--jobs", str(jobs)]
        command += ["--dir", str(Path(tmp) / "demo"), "--port", str(_free_port())]
        before = _load()
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"cpci demo failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    total = DONE_LINE.search(done.stdout)
    own = total["s"] if total else "?"
    print(f"--jobs {jobs}: wall {wall:.0f} s (the demo's own total {own} s)")
    print(f"  load average before {before}, after {_load()} (on {os.cpu_count()} CPUs)")
    for match in JOB_LINE.finditer(done.stdout):
        print(f"  {match['job']}: {match['s']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, action="append", help="jobs at once (repeatable)")
    for jobs in parser.parse_args().jobs or [2]:
        run_once(jobs)


if __name__ == "__main__":
    main()
