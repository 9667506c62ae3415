"""Dependencies point one way: the wire types and the URL map import nothing of cpci; the
uploader, the GitHub side and the Action import them, never the service.

Two checks per package, because each misses what the other sees: importing every module in a
fresh interpreter catches an import made at load time through any chain of modules, and reading
the source catches an import deferred into a function (it only loads when that code runs, e.g.
in the Action's report mode, and would still force the service's dependencies on the runner).
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICE = "cpci.server"


@dataclass(frozen=True)
class Layer:
    """A package (or module), the command-line modules that belong to it, and the cpci modules
    it must not load: `forbidden` is a package name (it and its submodules), `"cpci"` for all of
    cpci outside the layer itself."""

    package: str
    commands: tuple[str, ...] = ()
    forbidden: str = SERVICE

    def modules(self) -> list[str]:
        package = import_module(self.package)
        found = [self.package]
        if hasattr(package, "__path__"):
            found += [m.name for m in pkgutil.walk_packages(package.__path__, f"{self.package}.")]
        return sorted(found) + list(self.commands)

    def forbids(self, module: str) -> bool:
        """Whether loading `module` breaks the layer (`cpci` itself is only the namespace)."""
        if self.forbidden == "cpci":
            inside = module == self.package or module.startswith(self.package + ".")
            return module.startswith("cpci.") and not inside
        return module == self.forbidden or module.startswith(self.forbidden + ".")


LAYERS = [
    pytest.param(Layer("cpci.schema", forbidden="cpci"), id="cpci.schema"),
    pytest.param(Layer("cpci.urls", forbidden="cpci"), id="cpci.urls"),
    pytest.param(Layer("cpci.upload", ("cpci.cli.upload",)), id="cpci.upload"),
    pytest.param(Layer("cpci.github", ("cpci.cli.consistency",)), id="cpci.github"),
    pytest.param(Layer("cpci.action", ("cpci.cli.action",)), id="cpci.action"),
]


def imported_names(path: Path, module: str = "") -> set[str]:
    """Every module an import statement anywhere in the file may name (functions included):
    `from a import b` names `a` and `a.b` (b may be a module); a relative import is resolved
    against `module`, the file's own dotted name (and left out without it)."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (module or not node.level):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def source_of(module: str) -> Path:
    spec = import_module(module).__spec__
    assert spec is not None, module
    assert spec.origin is not None, module
    return Path(spec.origin)


@pytest.mark.parametrize("layer", LAYERS)
def test_loading_every_module_loads_no_forbidden_module(layer: Layer) -> None:
    modules = layer.modules()
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('cpci.'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = [m for m in done.stdout.split() if layer.forbids(m)]
    assert loaded == [], f"{layer.package} loads {loaded}"
    offenders = {
        module: sorted(n for n in imported_names(source_of(module)) if layer.forbids(n))
        for module in modules
    }
    offenders = {module: names for module, names in offenders.items() if names}
    assert offenders == {}, f"{layer.package} imports what it must not (deferred or not)"


def test_the_source_check_sees_a_deferred_import(tmp_path: Path) -> None:
    """The check above could pass by reading nothing: a function-level import must be found."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from cpci.server.reports import X\n    import cpci.server\n")
    assert imported_names(module) == {"cpci.server.reports", "cpci.server.reports.X", "cpci.server"}


def test_the_layers_tell_their_own_modules_from_the_rest() -> None:
    """The check above could pass by forbidding nothing: a schema module is not an offender of
    the schema layer, every other cpci module is."""
    schema = Layer("cpci.schema", forbidden="cpci")
    assert not schema.forbids("cpci.schema.results")
    assert schema.forbids("cpci.server.reports")
    assert schema.forbids("cpci.urls")
    assert not schema.forbids("pydantic")
    assert Layer("cpci.github").forbids("cpci.server.ui")
    assert not Layer("cpci.github").forbids("cpci.schema")
