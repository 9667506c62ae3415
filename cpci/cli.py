"""The `cpci` command."""

from __future__ import annotations

import argparse
import sys

from cpci import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cpci", description=__doc__)
    parser.add_argument("--version", action="version", version=f"cpci {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "test",
        help="run a test suite through the batched runner (arguments go to pytest)",
        add_help=False,
    )
    run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "test":
        import pytest

        return int(pytest.main(args.pytest_args))
    return 2


if __name__ == "__main__":
    sys.exit(main())
