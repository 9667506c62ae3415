"""Report mode installs the github extra alone: it reads the service over HTTP, so the
service's own packages (FastAPI, SQLAlchemy, psycopg, Alembic, ...) never reach the runner."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.pyproject import pyproject

ROOT = Path(__file__).resolve().parents[2]
#: Where a distribution's import name is not its name with `-` as `_`.
IMPORT_NAMES = {"pyjwt": "jwt"}


def extra(name: str) -> set[str]:
    """The import names of the distributions an extra of pyproject.toml lists."""
    project = pyproject()["project"]
    names = {
        re.split(r"[\[<>=~!;\s]", spec, maxsplit=1)[0].lower()
        for spec in project["optional-dependencies"][name]
    }
    return {IMPORT_NAMES.get(n, n.replace("-", "_")) for n in names}


def install_arguments(tmp_path: Path, mode: str) -> list[str]:
    """What the Install step passes to the venv script, run as GitHub runs it (bash)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s["name"] == "Install cpci")
    argv = tmp_path / "argv"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv}\n')
    python.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "CPCI_INPUT_PYTHON": str(python),
        "CPCI_INPUT_MODE": mode,
        "CPCI_ACTION_PATH": "/action",
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_ENV": str(tmp_path / "github_env"),
    }
    subprocess.run(["bash", "-e", "-c", step["run"]], env=env, check=True, timeout=60)
    return argv.read_text().splitlines()


@pytest.mark.parametrize(
    ("mode", "extras", "packages"),
    [("report", "github", ""), ("test", "github", "torch numpy ")],
)
def test_each_mode_installs_its_extras(
    tmp_path: Path, mode: str, extras: str, packages: str
) -> None:
    args = install_arguments(tmp_path, mode)
    assert args[args.index("--install") + 1] == f"/action[{extras}]"
    assert args[args.index("--runner-packages") + 1] == packages


def test_report_mode_loads_none_of_the_service_packages() -> None:
    service_only = extra("service") - extra("github")
    assert {"fastapi", "sqlalchemy", "sqlmodel", "alembic"} <= service_only
    script = (
        "import sys, cpci.cli.action, cpci.action.report_mode\n"
        "print('\\n'.join(sorted({m.partition('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "httpx" in loaded  # the check sees the packages report mode does load
    assert sorted(loaded & service_only) == []
