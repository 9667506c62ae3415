"""The `cpci` command: one module per subcommand, each with `register(subparsers)`.

A subcommand module adds its parser and sets `func` (taking the parsed arguments, returning the
exit code). Heavy imports go inside `func`, so `cpci --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cpci import __version__
from cpci.cli import (
    action,
    consistency,
    culprit,
    db,
    demo,
    fork_pull,
    loss_compare,
    quarantine,
    serve,
    test_suite,
    token,
    upload,
)

COMMANDS = (
    test_suite,
    serve,
    db,
    token,
    loss_compare,
    upload,
    consistency,
    action,
    fork_pull,
    quarantine,
    culprit,
    demo,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cpci", description="CI for distributed GPU test suites.")
    parser.add_argument("--version", action="version", version=f"cpci {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
