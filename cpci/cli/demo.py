"""`cpci demo`: the whole loop on this machine (service, CP suite history, uploads, comment, UI)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _jobs(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run the bundled CP suite for four main commits and a PR, report, and serve the UI",
        description="Starts the service on SQLite, runs the CP suite on CPU for four 'main' "
        "commits (a flaky config at some) and a 'PR' commit with an injected regression, "
        "uploads each job, prints the PR comment, the history and the UI's URLs, and serves the "
        "UI until Ctrl-C.",
    )
    parser.add_argument("--dir", default="artifacts/demo", help="work folder (emptied first)")
    parser.add_argument("--port", type=int, default=8765, help="the service's port (127.0.0.1)")
    parser.add_argument("--no-wait", action="store_true", help="stop the service when done")
    parser.add_argument(
        "--jobs", type=_jobs, default=None, help="CI jobs (suite runs) at once (default: 2)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.demo.run import PARALLEL, main

    parallel = PARALLEL if args.jobs is None else args.jobs
    return main(Path(args.dir).resolve(), args.port, wait=not args.no_wait, parallel=parallel)
