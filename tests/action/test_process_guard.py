"""cpci's process, guarded, is out of reach of a process of the same user: its environment
cannot be read through /proc, as it can be without the guard. Run as `nobody` (setpriv) where the
tests run as root, whom no guard stops; the guard is loaded by its path (standard library only),
so the system's Python can run it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GUARD = Path(__file__).resolve().parents[2] / "cpci" / "action" / "process_guard.py"
#: The guarded process: loads the guard, then starts a child that reads its environment.
PARENT = f"""
import importlib.util, subprocess, sys
spec = importlib.util.spec_from_file_location("process_guard", {str(GUARD)!r})
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)
if sys.argv[1] == "guarded":
    assert guard.guard_this_process()
environ = "open(f'/proc/{{os.getppid()}}/environ', 'rb').read()"
read = f"import os; print(b'CPCI_INPUT_TOKEN=s3cret' in {{environ}})"
child = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True)
print(child.stdout.strip() or child.stderr.strip().splitlines()[-1])
"""


def as_one_user() -> list[str]:
    """The command prefix that runs a process as an ordinary user (nobody, when we are root)."""
    if os.geteuid() != 0:
        return [sys.executable]
    python = shutil.which("python3", path="/usr/bin:/bin")
    if shutil.which("setpriv") is None or python is None:
        pytest.skip("as root, this needs setpriv and a system python3 to run as nobody")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")
@pytest.mark.parametrize(("mode", "seen"), [("open", "True"), ("guarded", "PermissionError")])
def test_a_guarded_process_keeps_its_environment_from_its_children(mode: str, seen: str) -> None:
    done = subprocess.run(
        [*as_one_user(), "-c", PARENT, mode],
        env={"PATH": "/usr/bin:/bin", "CPCI_INPUT_TOKEN": "s3cret"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(seen), done.stdout
