"""`cpci.evidence` is what the runner and the service share, so it loads neither of them, nor
torch, nor the service's dependencies: only `cpci.schema` and the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cpci.evidence
from tests.test_layering import imported_names

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sqlmodel", "sqlalchemy", "fastapi", "httpx")


def test_the_shared_rules_load_nothing_but_the_schema() -> None:
    script = "import sys, cpci.evidence\nprint('\\n'.join(sorted(m for m in sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    cpci_modules = {m for m in loaded if m.startswith("cpci.")}
    assert cpci_modules
    assert all(m.startswith(("cpci.evidence", "cpci.schema")) for m in cpci_modules)
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []


def test_its_public_surface_is_all_of_it() -> None:
    public = {n for n in vars(cpci.evidence) if not n.startswith(("_", "@"))}
    modules = {"arrival", "chance", "credible", "release", "reruns", "signatures"}
    assert sorted(cpci.evidence.__all__) == sorted(public - modules)


def test_no_module_defers_an_import_of_the_rest_of_cpci() -> None:
    """What a function imports loads only when it runs: read from the source too."""
    folder = ROOT / "cpci" / "evidence"
    found = {
        path.name: sorted(
            n
            for n in imported_names(path, f"cpci.evidence.{path.stem}")
            if (n.startswith("cpci.") and not n.startswith(("cpci.evidence", "cpci.schema")))
            or n.split(".")[0] in HEAVY
        )
        for path in folder.glob("*.py")
    }
    assert {name: names for name, names in found.items() if names} == {}
