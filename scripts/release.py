#!/usr/bin/env python3
"""Cut a release of the cpci Action: tag `vMAJOR.MINOR.PATCH`, then move `vMAJOR` to it.

Workflows pin `uses: cpci-dev/cpci@v1` (or the reusable workflow `@v1`), so `v1` must always
name the newest `v1.x.y`, and only ever move forward. Usage, on a clean checkout of the commit
to release (normally the tip of main, CI green):

    scripts/release.py v1.4.0            # create the tags locally, print the push command
    scripts/release.py v1.4.0 --push     # ... and push them to origin

See docs/releasing.md for what to check first.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

VERSION = re.compile(r"v(?P<major>[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)\.(?P<patch>0|[1-9][0-9]*)")


class ReleaseError(RuntimeError):
    """The release cannot be cut; the message says why and what to do."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise ReleaseError(f"`git {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout.strip()


def parse(version: str) -> tuple[int, int, int]:
    match = VERSION.fullmatch(version)
    if match is None:
        raise ReleaseError(f"a release is vMAJOR.MINOR.PATCH, e.g. v1.4.0; got {version!r}")
    return int(match["major"]), int(match["minor"]), int(match["patch"])


def latest(repo: Path, major: int) -> tuple[int, int, int] | None:
    """The newest existing `vMAJOR.x.y` tag."""
    found = [
        parse(t) for t in git(repo, "tag", "--list", f"v{major}.*").split() if VERSION.fullmatch(t)
    ]
    return max(found) if found else None


def release(repo: Path, version: str, *, push: bool = False) -> str:
    """Tag HEAD as `version` and move `vMAJOR` to it; returns the push command."""
    numbers = parse(version)
    major = f"v{numbers[0]}"
    if git(repo, "status", "--porcelain", "--untracked-files=no"):
        raise ReleaseError("the checkout has uncommitted changes: commit or stash them first")
    previous = latest(repo, numbers[0])
    if previous is not None and numbers <= previous:
        newest = "v{}.{}.{}".format(*previous)
        raise ReleaseError(f"{version} is not newer than {newest}: {major} only moves forward")
    git(repo, "tag", "--annotate", version, "--message", f"cpci {version}")
    moving = f"cpci {major} (moving: {version})"
    git(repo, "tag", "--force", "--annotate", major, f"{version}^{{commit}}", "--message", moving)
    command = f"git push origin {version} && git push --force origin {major}"
    if push:
        git(repo, "push", "origin", version)
        git(repo, "push", "--force", "origin", major)
    return command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="vMAJOR.MINOR.PATCH, newer than every existing one")
    parser.add_argument("--push", action="store_true", help="push both tags to origin")
    parser.add_argument("--repo", default=".", help="the checkout (default: .)")
    args = parser.parse_args(argv)
    try:
        command = release(Path(args.repo), args.version, push=args.push)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    print(f"tagged {args.version} and moved {args.version.split('.')[0]} to it")
    if not args.push:
        print(f"publish with: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
