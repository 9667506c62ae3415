"""Which test files the fork server can preload before the parent has collected anything.

The fork launcher's server is started as the session starts, so that its preload (torch, pytest,
the plugins, the test files' imports) runs beside the parent's own collection rather than after
it. At that point only the command line is known: its files, and for its directories the files
pytest's `python_files` would match (directories `norecursedirs` names are left out, as pytest
leaves them). Only files that mention cpci (or, under `--cpci-testcases=shared`, torch) can hold
configs, and a session whose named files hold none starts no server early (a plain session must
not pay for importing torch). Past `MAX_FILES` candidates the files are not read: the server then
preloads the directories' conftests and the rest of the rank side only. A file collected later
that was not preloaded is imported by the ranks themselves: correct, only slower.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest
from _pytest.pathlib import fnmatch_ex

#: How many candidate test files are read for a mention of cpci before giving up on files.
MAX_FILES = 256


class PreloadTargets(NamedTuple):
    """What the early fork server preloads: test files, and directories for their conftests."""

    files: list[str]
    dirs: list[str]


def early_targets(config: pytest.Config, *, harness_tests: bool) -> PreloadTargets | None:
    """The command line's test files that may hold configs, or None when none may (or the
    arguments are not paths, e.g. `--pyargs`): then no server is started before collection."""
    if config.option.pyargs:
        return None
    base = Path(config.invocation_params.dir)
    files: list[Path] = []
    dirs: list[Path] = []
    for arg in config.args:
        path = (base / arg.split("::", 1)[0]).resolve()
        if path.is_dir():
            dirs.append(path)
            files.extend(_test_files(config, path, MAX_FILES + 1 - len(files)))
        elif path.suffix == ".py" and path.is_file():
            files.append(path)
        if len(files) > MAX_FILES:
            return PreloadTargets(files=[], dirs=[str(d) for d in dirs]) if dirs else None
    words = (b"cpci", b"torch") if harness_tests else (b"cpci",)
    chosen = [str(f) for f in dict.fromkeys(files) if _mentions(f, words)]
    if not chosen:
        return None
    return PreloadTargets(files=chosen, dirs=[str(d) for d in dirs])


def _test_files(config: pytest.Config, top: Path, limit: int) -> list[Path]:
    """Up to `limit` files under `top` that pytest's `python_files` patterns match."""
    patterns: list[str] = config.getini("python_files")
    skipped: list[str] = config.getini("norecursedirs")
    found: list[Path] = []
    for directory, subdirs, names in os.walk(top):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if not any(fnmatch_ex(p, here / d) for p in skipped))
        for name in sorted(names):
            path = here / name
            if name.endswith(".py") and any(fnmatch_ex(p, path) for p in patterns):
                found.append(path)
                if len(found) >= limit:
                    return found
    return found


def _mentions(path: Path, words: tuple[bytes, ...]) -> bool:
    try:
        text = path.read_bytes()
    except OSError:
        return False
    return any(word in text for word in words)
