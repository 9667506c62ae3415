"""`cpci test [PYTEST ARGS...]`: run tests through the batched runner (plain pytest underneath)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "test",
        help="run a test suite through the batched runner; every argument goes to pytest",
        description="Runs pytest with the cpci plugin. Example: "
        "cpci test --pyargs cpci.suites.example --cpci-batch-size 16",
    )
    parser.set_defaults(func=run, accepts_extra=True)


def run(args: argparse.Namespace) -> int:
    # A fresh interpreter: pytest must import (and assertion-rewrite) cpci's own suites itself.
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *args.extra])
    return 0  # not reached
