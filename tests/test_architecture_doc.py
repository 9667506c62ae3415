"""docs/architecture.md names only what exists: every `cpci.…` name in backticks or in a drawing
imports (a module, or a module and the attributes after it), and every file path there
(`crud/runs.py`: in the service's section, relative to cpci/server/) is a file. Checked section
by section, so a stale name points at the part of the page that holds it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
#: A name in backticks: `cpci.a.b`, `cpci.a.B.c`, or a path ending in .py.
DOTTED = re.compile(r"`(cpci(?:\.\w+)+)`")
PATH = re.compile(r"`((?:[\w.-]+/)*[\w-]+\.py)`")
#: The same, bare, in a drawing (a fenced block); `cpci.result/1` is a schema, not a module.
FENCED = re.compile(r"(?ms)^```\w*\n(.*?)^```")
BARE_DOTTED = re.compile(r"(?<![\w.])(cpci(?:\.\w+)+)(?![\w/])")
BARE_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.py)\b")


SERVICE = "Service: upload -> stored rows -> report inputs -> verdicts -> comment / check run / UI"
RUNNER = "Runner: plan -> rank payload -> journal event -> agreed record -> results line"


def sections() -> dict[str, str]:
    parts = re.split(r"(?m)^## ", DOC.read_text(encoding="utf-8"))
    return {part.splitlines()[0].strip(): part for part in parts[1:]}


def missing_name(dotted: str) -> str | None:
    """Why `dotted` does not resolve (None when it does): the longest prefix that imports as a
    module, then each name after it as an attribute (a pydantic model's fields count)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            fields = getattr(found, "model_fields", {})
            if hasattr(found, name):
                found = getattr(found, name)
            elif name in fields:
                found = fields[name]
            else:
                return f"{dotted}: {'.'.join(parts[:cut])} has no {name!r}"
        return None
    return f"{dotted}: no such module"


def missing_path(path: str) -> str | None:
    for base in (ROOT, ROOT / "cpci" / "server"):
        if (base / path).is_file():
            return None
    return f"{path}: no such file (from the project root or cpci/server/)"


def test_the_page_has_its_sections() -> None:
    assert {"Service", "Runner", "Uploader and Action", "Wire types and URLs"} <= {
        title.split(":")[0] for title in sections()
    }


@pytest.mark.parametrize("title", sorted(sections()))
def test_every_module_a_section_names_exists(title: str) -> None:
    text = sections()[title]
    drawings = "\n".join(FENCED.findall(text))
    names = {*DOTTED.findall(text), *BARE_DOTTED.findall(drawings)}
    paths = {*PATH.findall(text), *BARE_PATH.findall(drawings)}
    problems = [p for name in sorted(names) if (p := missing_name(name))]
    problems += [p for path in sorted(paths) if (p := missing_path(path))]
    assert problems == []


def test_the_checker_finds_a_stale_name() -> None:
    """The checks can fail: a module that is gone, an attribute that is gone, a file that is
    gone are each named; names that exist are not."""
    assert (
        missing_name("cpci.server.webhook_worker")
        == "cpci.server.webhook_worker: cpci.server has no 'webhook_worker'"
    )
    assert missing_name("cpci.server.crud.pull_report.report_policy") is not None
    assert missing_name("cpci.nothing_here") is not None
    assert missing_path("shard_cache.py") is not None
    assert missing_name("cpci.server.crud.uploads.store_upload") is None
    assert missing_name("cpci.server.core.config.Settings.trusted_branches") is None
    assert missing_path("crud/shard_cache.py") is None
    assert missing_path("tests/server/test_layers.py") is None
    drawing = "```\nrunner --> cpci.result/1 --> cpci.gone.module\n  crud/gone.py\n```\n"
    (block,) = FENCED.findall(drawing)
    assert BARE_DOTTED.findall(block) == ["cpci.gone.module"]
    assert BARE_PATH.findall(block) == ["crud/gone.py"]


def drawn_modules(drawing: str) -> dict[str, set[str]]:
    """The modules a layer drawing lists after each `folder/` (on its line and on the lines
    indented under it), less notes in parentheses (over several lines too) and the arrows and
    notes between folders."""
    unnoted = re.sub(r"\([^)]*\)", lambda note: "\n" * note.group().count("\n"), drawing)
    listed: dict[str, set[str]] = {}
    folder = ""
    for line in unnoted.splitlines():
        if match := re.match(r"(\w+)/\s", line):
            folder = match.group(1)
            line = line[match.end() :]
        elif not line.startswith(" " * 10):
            continue  # an arrow, or a note between layers
        listed.setdefault(folder, set()).update(re.findall(r"[a-z_]+(?:/[a-z_]+)?", line))
    return listed


def modules_in(folder: Path, *, nested: bool = True) -> set[str]:
    """The modules of a package, as a drawing names them (`routes/uploads`); `nested=False`:
    only those directly in it."""
    found = folder.rglob("*.py") if nested else folder.glob("*.py")
    return {str(p.relative_to(folder).with_suffix("")) for p in found if p.name != "__init__.py"}


def test_the_service_drawing_names_each_module_of_each_layer() -> None:
    """The service's layer drawing lists, after each `folder/`, exactly the modules in it: a
    module added, moved or removed shows as a difference."""
    (drawing, *_) = FENCED.findall(sections()[SERVICE])
    listed = drawn_modules(drawing)
    server = ROOT / "cpci" / "server"
    assert listed == {folder: modules_in(server / folder) for folder in listed}
    packages = {p.name for p in server.iterdir() if (p / "__init__.py").is_file()}
    assert packages - set(listed) == {"migrations"}  # every layer is drawn


def runner_differences(drawing: str, runner: Path) -> list[str]:
    """What a runner drawing gets wrong about the package at `runner`: each side (`parent/`,
    `rank/`, `wire/`, `launch/`) and the modules below them (`runner/`) must list exactly the
    modules there, and every side must be drawn."""
    listed = drawn_modules(drawing)
    actual = {
        side: modules_in(runner / side)
        for side in (p.name for p in runner.iterdir() if (p / "__init__.py").is_file())
    }
    actual["runner"] = modules_in(runner, nested=False)
    problems = []
    for side in sorted(set(listed) | set(actual)):
        drawn, there = listed.get(side, set()), actual.get(side, set())
        problems += [f"{side}/: {name} is drawn but no module" for name in sorted(drawn - there)]
        problems += [f"{side}/: {name} is a module but not drawn" for name in sorted(there - drawn)]
    return problems


def test_the_runner_drawing_names_each_module_of_each_side() -> None:
    """The runner's drawing lists, after each side, exactly the modules in it."""
    (drawing, *_) = FENCED.findall(sections()[RUNNER])
    assert runner_differences(drawing, ROOT / "cpci" / "runner") == []


def test_the_runner_check_finds_a_module_gone_added_or_a_side_undrawn(tmp_path: Path) -> None:
    """The check can fail: a drawn module that is gone, a module not drawn (a nested one too),
    a side with no line are each named; a drawing that matches passes."""
    for module in ("plugin", "parent/session", "parent/deep/queue", "wire/feed", "rank/worker"):
        path = tmp_path / f"{module}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    for side in ("", "parent", "parent/deep", "wire", "rank"):
        (tmp_path / side / "__init__.py").write_text("")
    drawing = (
        "runner/   plugin\n"
        "            (a note naming gone_module,\n"
        "             over two lines)\n"
        "parent/   session gone\n"
        "    |  an arrow naming another\n"
        "wire/     feed\n"
    )
    assert runner_differences(drawing, tmp_path) == [
        "parent/: gone is drawn but no module",
        "parent/: deep/queue is a module but not drawn",
        "rank/: worker is a module but not drawn",
    ]
    fixed = drawing.replace("gone", "deep/queue") + "rank/     worker\n"
    assert runner_differences(fixed, tmp_path) == []
