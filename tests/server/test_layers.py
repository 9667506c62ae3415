"""Inside the service, reads point one way: rows -> queries (`crud`, `analysis`) -> views ->
responses (`api` JSON, `ui` HTML). The views and the API build nothing from the HTML side, so
a JSON twin can never depend on how its page is rendered.

Read from the source (`cpci.server`'s package loads the whole app, so importing a module says
nothing about what that module itself names).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_layering import imported_names

SERVER = Path(__file__).resolve().parents[2] / "cpci" / "server"


def _modules(folder: str) -> list[Path]:
    return sorted((SERVER / folder).rglob("*.py"))


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("views", ("cpci.server.ui", "cpci.server.api", "fastapi")),
        ("api", ("cpci.server.ui",)),
        ("crud", ("cpci.server.ui", "cpci.server.api", "cpci.server.views")),
        ("analysis", ("cpci.server.ui", "cpci.server.api", "cpci.server.views", "sqlmodel")),
    ],
)
def test_a_layer_imports_nothing_above_it(folder: str, forbidden: tuple[str, ...]) -> None:
    modules = _modules(folder)
    assert modules, f"no modules under cpci/server/{folder}"
    offenders = {
        str(path.relative_to(SERVER)): sorted(
            name
            for name in imported_names(path)
            if any(name == f or name.startswith(f + ".") for f in forbidden)
        )
        for path in modules
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_there_is_one_shard_cache_and_no_module_global_one() -> None:
    """The app owns the cache (`app.state.shard_cache`); a module-level registry of caches per
    engine would be a second one that outlives the app."""
    sources = {path: path.read_text(encoding="utf-8") for path in SERVER.rglob("*.py")}
    holders = sorted(str(p.relative_to(SERVER)) for p, text in sources.items() if "WeakKey" in text)
    assert holders == []
    makers = sorted(
        str(p.relative_to(SERVER)) for p, text in sources.items() if "ShardCache()" in text
    )
    assert makers == ["app.py"]
