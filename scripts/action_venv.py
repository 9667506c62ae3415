"""Make the Action's virtual environment: cpci's own dependencies isolated from the runner's
Python, which still lends its torch.

Run by action.yml with the runner's Python (the one that has torch), before cpci is installed,
so it uses the standard library only. Why: on a persistent self-hosted runner, an earlier job
(a fork PR's, say) can `pip install` into the runner's Python or the user's pip config. A venv
made with `--system-site-packages` would then import those packages instead of cpci's
dependencies (pip sees a requirement satisfied there and installs nothing), run their `.pth`
lines at every start, and hand their pytest plugins (entry points) to pytest, in later jobs that
hold `id-token: write` or the upload token. So:

1. the venv is made without the system site-packages, and pip installs cpci and every
   dependency into it, ignoring pip config files (`PIP_CONFIG_FILE=/dev/null`: a planted
   `~/.config/pip/pip.conf` cannot name another index; `PIP_*` variables set for the runner,
   e.g. a mirror, still apply) and without pip's cache (shared by every job of the runner user);
2. only then does a `.pth` file append one directory to the venv's `sys.path`: links to the
   runner's torch and numpy, the distributions they require (and any named in
   `CPCI_RUNNER_PACKAGES`, such as the library under test), nothing else of the runner's
   site-packages. The venv's own packages come first; a `.pth` path line adds a directory
   without running the `.pth` files in it.

The script itself runs as `python -I -S`: without the `site` module the runner's `.pth` files do
not run here either (a planted one would run with the job's credentials in its environment); it
puts the runner's site-packages folders on `sys.path` itself, to read their metadata.

What this cannot do: torch itself (and what it requires) still comes from the runner's Python;
keep that Python read-only to the job's user, or use ephemeral runners (SECURITY.md).

    python3 -I -S scripts/action_venv.py VENV --install 'PATH[extras]' [--runner-packages 'torch']
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import os
import re
import site
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Iterable
from pathlib import Path

#: The `.pth` file (in the venv's site-packages) and the folder of links it adds.
PTH_NAME = "cpci-runner-packages.pth"
LINKS_DIR = "runner-packages"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def runner_site_dirs() -> list[str]:
    """This Python's site-packages folders, found without running the `site` module (under
    `-S`): a venv's own (Python 3.10 sets `sys.prefix` for a venv in `site`, so `pyvenv.cfg`
    is looked for here) and, if it includes them, its base's; else the installation's (Debian's
    dist-packages too) and the user's."""
    cfg = Path(sys.executable).parent.parent / "pyvenv.cfg"
    if not cfg.is_file():
        dirs = [*site.getsitepackages(), site.getusersitepackages()]
    else:
        prefix = str(cfg.parent)
        paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
        dirs = [paths["purelib"], paths["platlib"]]
        if re.search(r"^include-system-site-packages\s*=\s*true", cfg.read_text(), re.M | re.I):
            dirs += site.getsitepackages([sys.base_prefix])
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def requirement_closure(names: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions named and, recursively, those they require (extras and
    requirements that are not installed are left out)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for requirement in dist.requires or ():
            _, _, marker = requirement.partition(";")
            if re.search(r"\bextra\s*==", marker):
                continue
            match = _NAME.match(requirement)
            if match:
                todo.append(match.group(0))
    return list(seen.values())


def top_level_paths(dist: metadata.Distribution) -> set[Path]:
    """The files and folders a distribution put directly in its site-packages folder (its
    packages, modules and `.dist-info`); never scripts, `.pth` files or `__pycache__`."""
    base = Path(str(dist.locate_file("")))
    tops: set[str] = set()
    for file in dist.files or ():
        first = Path(str(file)).parts[0]
        if first not in ("..", "__pycache__") and not first.endswith(".pth"):
            tops.add(first)
    if not tops:  # no RECORD: fall back on top_level.txt
        tops.update((dist.read_text("top_level.txt") or "").split())
    return {base / top for top in tops if (base / top).exists()}


def link_runner_packages(names: list[str], into: Path) -> list[str]:
    """Fill `into` with links to the distributions `requirement_closure(names)`; returns the
    names asked for that the runner's Python does not have."""
    into.mkdir(parents=True, exist_ok=True)
    for dist in requirement_closure(names):
        for path in top_level_paths(dist):
            link = into / path.name
            if not os.path.lexists(link):  # a namespace folder (nvidia) is shared
                link.symlink_to(path)
    missing = []
    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_venv(root: Path, install: str, runner_packages: list[str]) -> Path:
    """Create the venv at `root` (anew), install `install` into it, then add the runner's
    packages; returns the venv's Python."""
    venv.EnvBuilder(with_pip=True, clear=True, system_site_packages=False).create(root)
    python = venv_python(root)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1"}
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, install], check=True, env=env)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    links = root / LINKS_DIR
    missing = link_runner_packages(runner_packages, links)
    for name in missing:
        print(f"::warning::cpci: the runner's Python ({sys.executable}) has no {name}")
    (Path(site) / PTH_NAME).write_text(f"{links}\n")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venv", type=Path, help="where the venv is made (replaced if there)")
    parser.add_argument("--install", required=True, help="what pip installs, e.g. 'PATH[github]'")
    parser.add_argument(
        "--runner-packages",
        default="torch numpy",
        help="space-separated distributions of this Python the venv may import (with what "
        "they require)",
    )
    args = parser.parse_args(argv)
    if sys.flags.no_site:
        sys.path.extend(runner_site_dirs())
    python = make_venv(args.venv, args.install, args.runner_packages.split())
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
