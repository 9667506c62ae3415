"""What the fork launcher's server imports once, so that each forked rank starts warm.

Imported by the multiprocessing fork server (`set_forkserver_preload`) when it starts, with the
session's `PreloadSpec` in the environment variable `CPCI_PRELOAD`. It imports torch, pytest,
cpci's rank side, the installed pytest plugins, and each test file the ranks will collect (with
its conftests), then drops the
test modules and conftests from `sys.modules` again: a rank's pytest imports them afresh, with
assertion rewriting, cheaply, as everything they import is loaded.

It must never raise (the fork server dies on anything but an ImportError) and never initialise
CUDA or run a torch op, or forking would not be safe (`cpci.runner.launch.fork_rank` checks). A test
module that fails to import here is left to fail in the rank, where pytest reports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

import pytest
from pydantic import BaseModel

#: The environment variable the fork server finds its `PreloadSpec` in.
PRELOAD_ENV = "CPCI_PRELOAD"


class PreloadSpec(BaseModel):
    """What the fork server imports, and how pytest would import it."""

    files: list[str]  # the test files the ranks collect
    dirs: list[str] = []  # directories whose conftests (and their parents') are preloaded too
    plugins: list[str]  # the modules of the pytest plugins the ranks' pytest loads itself
    rootdir: str
    importmode: str = "prepend"
    sys_path: list[str]  # the parent's (Python 3.11's fork server does not apply it)
    log: str  # where the fork server's own output goes


def preload(spec: PreloadSpec) -> None:
    """Import the rank side and the test files' dependencies; never raises."""
    sys.path[:] = list(dict.fromkeys([*spec.sys_path, *sys.path]))
    for module in ("torch", "torch.distributed", "pytest", "cpci.runner.rank.worker"):
        with contextlib.suppress(BaseException):
            __import__(module)
    for module in spec.plugins:
        with contextlib.suppress(BaseException), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            __import__(module)
    before = set(sys.modules)
    root = Path(spec.rootdir)
    for path in [*_conftests([*spec.files, *spec.dirs], root), *spec.files]:
        with contextlib.suppress(BaseException), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _import(Path(path), root, spec.importmode)
    forget_suite_modules(spec.files, set(sys.modules) - before)


def forget_suite_modules(test_files: Iterable[str], names: Iterable[str] | None = None) -> None:
    """Drop the test modules and conftests (of `names`, by default all) from `sys.modules`, so
    that a rank's pytest imports them afresh, with assertion rewriting and its own conftest
    plugins; what they import stays loaded, which is what makes that cheap."""
    files = {str(Path(f).resolve()) for f in test_files}
    basenames = {os.path.basename(f) for f in files}  # torch alone is thousands of modules
    for name in list(sys.modules if names is None else names):
        file = getattr(sys.modules.get(name), "__file__", None) or ""
        base = os.path.basename(file)
        if base == "conftest.py" or (base in basenames and str(Path(file).resolve()) in files):
            del sys.modules[name]


def autoloaded_plugins(config: pytest.Config) -> list[str]:
    """The modules of the installed pytest plugins (`pytest11` entry points) the ranks' pytest
    loads: importing them is most of a rank's pytest start-up. Those the session blocks
    (`-p no:NAME`, PYTEST_DISABLE_PLUGIN_AUTOLOAD) stay out. Preloaded, their asserts are not
    rewritten (pytest's warning about it is silenced in the ranks); a test module's still are."""
    from importlib.metadata import entry_points

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    blocked = config.pluginmanager.is_blocked
    return [e.module for e in entry_points(group="pytest11") if not blocked(e.name)]


def _conftests(places: list[str], root: Path) -> list[str]:
    """The conftest.py files pytest would load for `places` (files, or directories), outermost
    first, each once."""
    found: dict[str, None] = {}
    for place in places:
        path = Path(place).resolve()
        directory = path if path.is_dir() else path.parent
        chain = [d for d in [directory, *directory.parents] if d == root or d.is_relative_to(root)]
        for d in reversed(chain):
            if (d / "conftest.py").is_file():
                found[str(d / "conftest.py")] = None
    return list(found)


def _import(path: Path, root: Path, importmode: str) -> None:
    from _pytest.pathlib import import_path

    import_path(path, mode=importmode, root=root, consider_namespace_packages=False)


def _from_environment() -> None:
    text = os.environ.get(PRELOAD_ENV)
    if not text:
        return
    try:
        spec = PreloadSpec.model_validate_json(text)
        fd = os.open(spec.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        preload(spec)
    except BaseException:  # the fork server must live on; the ranks will report the error
        pass


_from_environment()
