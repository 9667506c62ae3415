"""The `cpci` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cpci import __version__
from tests.prerequisites import import_or_skip


def cpci(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpci", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_version_and_help() -> None:
    assert cpci("--version").stdout.strip() == f"cpci {__version__}"
    assert "test" in cpci("--help").stdout


def test_unknown_arguments_are_refused() -> None:
    result = cpci("--bogus")
    assert result.returncode == 2
    assert "the following arguments are required: COMMAND" in result.stderr


def test_test_runs_pytest_with_the_plugin(tmp_path: Path) -> None:
    import_or_skip("torch", "torch", "cpci test plans its worlds with torch")
    (tmp_path / "test_x.py").write_text(
        "import pytest\n@pytest.mark.cpci(world_size=2)\ndef test_a():\n    pass\n"
    )
    result = cpci("test", "--cpci-plan", "-p", "no:cacheprovider", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cpci plan: 1 config(s) in 1 group(s)" in result.stdout
