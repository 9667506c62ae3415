"""The runner's sides import one way: the rank's side nothing of the parent's, the wire neither
side, the launchers nothing of the parent; the option vocabularies (above the wire only) and the
harness classes sit below the other sides; and no module of the runner imports the uploader, the
GitHub side or the service.

Each rule is checked twice, because each check misses what the other sees: importing every module
of the layer in a fresh interpreter catches an import made at load time through any chain of
modules, and reading the sources catches one deferred into a function (it loads only when that
code runs, e.g. in a rank, and still ties the rank to the parent's code). Both checks are run on
planted imports, so a rule that forbids nothing or a checker that reads nothing fails here.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import pytest

from tests.test_layering import imported_names, source_of

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
RUNNER = "cpci.runner"
PARENT, RANK, WIRE, LAUNCH = (f"{RUNNER}.{side}" for side in ("parent", "rank", "wire", "launch"))
#: The top-level modules that hold the parent's session together: only the parent may use them.
PLUGIN, SETTINGS = f"{RUNNER}.plugin", f"{RUNNER}.settings"
OPTIONS, HARNESS = f"{RUNNER}.options", f"{RUNNER}.harness"


@dataclass(frozen=True)
class Layer:
    """A package or module of the runner and the packages (or modules) it must not load."""

    name: str
    forbidden: tuple[str, ...]

    def modules(self) -> list[str]:
        package = import_module(self.name)
        found = [self.name]
        if hasattr(package, "__path__"):
            found += [m.name for m in pkgutil.walk_packages(package.__path__, f"{self.name}.")]
        return sorted(found)

    def forbids(self, module: str) -> bool:
        inside = module == self.name or module.startswith(self.name + ".")
        return not inside and any(module == f or module.startswith(f + ".") for f in self.forbidden)


EVERY_SIDE = (PARENT, RANK, WIRE, LAUNCH, PLUGIN, SETTINGS)
LAYERS = [
    Layer(RANK, (PARENT, LAUNCH, PLUGIN, SETTINGS)),
    Layer(WIRE, (*EVERY_SIDE, OPTIONS, HARNESS)),
    Layer(LAUNCH, (PARENT, PLUGIN, SETTINGS)),
    Layer(OPTIONS, (PARENT, RANK, LAUNCH, PLUGIN, SETTINGS)),  # above the wire: its `Backend`
    Layer(HARNESS, (*EVERY_SIDE, OPTIONS)),
    Layer(SETTINGS, (PARENT, RANK, LAUNCH, PLUGIN)),
    Layer(RUNNER, ("cpci.upload", "cpci.github", "cpci.server", "cpci.action")),
]


def loaded_by(modules: list[str], path: Path | None = None) -> set[str]:
    """The cpci modules a fresh interpreter has loaded once it imported `modules` (with `path`
    first on sys.path)."""
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('cpci'))))\n"
    )
    pythonpath = [str(path)] if path is not None else []
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": ":".join([*pythonpath, str(ROOT)]), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize("layer", LAYERS, ids=[layer.name for layer in LAYERS])
def test_a_layer_loads_nothing_it_must_not(layer: Layer) -> None:
    loaded = sorted(m for m in loaded_by(layer.modules()) if layer.forbids(m))
    assert loaded == [], f"importing {layer.name} loads {loaded}"


@pytest.mark.parametrize("layer", LAYERS, ids=[layer.name for layer in LAYERS])
def test_a_layer_imports_nothing_it_must_not_deferred_or_not(layer: Layer) -> None:
    offenders = {
        module: sorted(n for n in imported_names(source_of(module), module) if layer.forbids(n))
        for module in layer.modules()
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_the_source_check_finds_a_planted_import_of_every_kind(tmp_path: Path) -> None:
    planted = tmp_path / "plant.py"
    planted.write_text(
        "def later():\n"
        "    from cpci.runner.parent.session import ParentSession\n"
        "    import cpci.runner.parent.scheduler\n"
        "    from cpci.runner.parent import attempts\n"
        "    from ..parent import world\n"
    )
    names = imported_names(planted, "cpci.runner.rank.plant")
    rank = next(layer for layer in LAYERS if layer.name == RANK)
    assert {n for n in names if rank.forbids(n)} == {
        "cpci.runner.parent.session",
        "cpci.runner.parent.session.ParentSession",
        "cpci.runner.parent.scheduler",
        "cpci.runner.parent",
        "cpci.runner.parent.attempts",
        "cpci.runner.parent.world",
    }


def test_the_load_check_finds_a_module_loaded_through_a_chain(tmp_path: Path) -> None:
    (tmp_path / "plant_a.py").write_text("import plant_b\n")
    (tmp_path / "plant_b.py").write_text("import cpci.runner.parent.scheduler\n")
    loaded = loaded_by(["plant_a"], tmp_path)
    rank = next(layer for layer in LAYERS if layer.name == RANK)
    assert "cpci.runner.parent.scheduler" in {m for m in loaded if rank.forbids(m)}


def test_each_rule_tells_its_own_modules_from_the_ones_it_forbids() -> None:
    wire, runner = LAYERS[1], LAYERS[-1]
    assert not wire.forbids("cpci.runner.wire.protocol")
    assert wire.forbids("cpci.runner.rank.plugin")
    assert not wire.forbids("cpci.schema")
    assert runner.forbids("cpci.server.crud.uploads")
    assert not runner.forbids("cpci.runner.parent.session")
    assert not runner.forbids("cpci.urls")


def test_every_module_of_the_runner_is_on_one_side_or_below_them() -> None:
    """A module added beside the sides must be placed: on a side, or named here as a top-level
    module with a rule of its own (or, like the plugin and the hookspecs, the session's glue)."""
    runner = import_module(RUNNER)
    top = {m.name for m in pkgutil.iter_modules(runner.__path__, f"{RUNNER}.")}
    assert top == {*EVERY_SIDE, OPTIONS, HARNESS, f"{RUNNER}.hookspecs"}
