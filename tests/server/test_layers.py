"""Inside the service, dependencies point one way: `api` (JSON) and `ui` (HTML) -> `views` ->
`crud` (stored rows) -> `analysis` (pure decisions), with `core` (settings, policies, errors,
the database engine) beside them. The views and the API build nothing from the HTML side, so a
JSON twin can never depend on how its page is rendered; `analysis` reads no database, so every
verdict can be tested on hand-built inputs; only the app's edge reads `Settings` (`app.py`,
`core.policies`, `api`), and crud and views take the policies they use.

Read from the source (`cpci.server`'s package loads the whole app, so importing a module says
nothing about what that module itself names). The checker is tested on a planted import too, so
a check that can no longer fail does not pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.test_layering import imported_names

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "cpci" / "server"

#: What the database layer is, to a module that must not read it.
DATABASE = (
    "sqlmodel",
    "sqlalchemy",
    "psycopg",
    "alembic",
    "cpci.server.crud",
    "cpci.server.models",
    "cpci.server.core.db",
    "cpci.server.core.migrate",
)
#: The layers above the views.
RESPONSES = ("fastapi", "starlette", "cpci.server.api", "cpci.server.ui", "cpci.server.app")
SETTINGS = ("cpci.server.core.config", "pydantic_settings")

RULES: list[tuple[str, tuple[str, ...]]] = [
    ("analysis", (*DATABASE, *RESPONSES, *SETTINGS, "cpci.server.views", "cpci.server.webhooks")),
    ("views", (*RESPONSES, *SETTINGS, "cpci.server.webhooks")),
    ("crud", (*RESPONSES, *SETTINGS, "cpci.server.views", "cpci.server.webhooks")),
    ("api", ("cpci.server.ui", "cpci.server.app")),
    ("webhooks", (*RESPONSES, "cpci.server.views")),
    # `core` is below every layer; `core.policies` alone reads the analysis' policy types.
    ("core", ("cpci.server.api", "cpci.server.ui", "cpci.server.views", "cpci.server.crud")),
]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def crossings(
    paths: Iterable[Path], forbidden: tuple[str, ...], root: Path = ROOT
) -> dict[str, list[str]]:
    """The forbidden modules each file under `root` imports (files importing none left out)."""
    found = {}
    for path in paths:
        module = module_name(path, root)
        names = sorted(
            name
            for name in imported_names(path, module)
            if any(name == f or name.startswith(f + ".") for f in forbidden)
        )
        if names:
            found[module] = names
    return found


def layer_modules(folder: str) -> list[Path]:
    return sorted((SERVER / folder).rglob("*.py"))


@pytest.mark.parametrize(("folder", "forbidden"), RULES, ids=[rule[0] for rule in RULES])
def test_a_layer_imports_nothing_above_it(folder: str, forbidden: tuple[str, ...]) -> None:
    modules = layer_modules(folder)
    assert modules, f"no modules under cpci/server/{folder}"
    assert crossings(modules, forbidden) == {}


def test_the_checker_finds_a_planted_import_of_each_kind(tmp_path: Path) -> None:
    """A module in a copy of `analysis/` that imports the database four ways (a plain import,
    `from` a module, `from` a package of a module, a relative import) is caught each time, and
    a clean one is not."""
    copy = tmp_path / "cpci" / "server" / "analysis"
    copy.mkdir(parents=True)
    planted = {
        "plain.py": "import sqlalchemy\n",
        "from_module.py": "from sqlmodel import Session\n",
        "from_package.py": "from cpci.server import models\n",
        "relative.py": "def f() -> None:\n    from ..crud import runs\n",
        "clean.py": "from cpci.schema import ResultRecord\nfrom . import verdicts\n",
    }
    for name, text in planted.items():
        (copy / name).write_text(text, encoding="utf-8")
    found = crossings(sorted(copy.glob("*.py")), dict(RULES)["analysis"], root=tmp_path)
    assert found == {
        "cpci.server.analysis.from_module": ["sqlmodel", "sqlmodel.Session"],
        "cpci.server.analysis.from_package": ["cpci.server.models"],
        "cpci.server.analysis.plain": ["sqlalchemy"],
        "cpci.server.analysis.relative": ["cpci.server.crud", "cpci.server.crud.runs"],
    }


def test_only_the_edge_reads_the_settings() -> None:
    """`Settings` is read where the app is built (and by the parts that build their own piece
    of it at start-up: the body limits, the webhook worker's policy and GitHub access)."""
    readers = sorted(
        module_name(path)
        for path in SERVER.rglob("*.py")
        if "cpci.server.core.config" in imported_names(path, module_name(path))
    )
    assert readers == [
        "cpci.server",
        "cpci.server.api.body_limits",
        "cpci.server.api.deps",
        "cpci.server.app",
        "cpci.server.core.policies",
        "cpci.server.webhooks.handling",
        "cpci.server.webhooks.worker",
    ]


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
