"""The README's `uses:` lines agree with `action.yml` and the reusable workflow, and
scripts/release.py cuts `v1.x.y` and moves `v1` forward only (docs/releasing.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
USES = re.compile(r"cpci-dev/cpci(?P<path>/[^@\s]+)?@(?P<ref>\S+)")


def yaml_blocks(text: str) -> list[Any]:
    blocks = re.findall(r"```ya?ml\n(.*?)```", text, flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def uses_of_cpci(node: Any) -> list[dict[str, Any]]:
    """Every mapping with a `uses: cpci-dev/cpci...` key, however deep."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("uses"), str) and USES.fullmatch(node["uses"]):
            found.append(node)
        for value in node.values():
            found += uses_of_cpci(value)
    elif isinstance(node, list):
        for item in node:
            found += uses_of_cpci(item)
    return found


def declared_inputs(path: str | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return dict(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
    workflow = yaml.safe_load((ROOT / path.lstrip("/")).read_text())
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    return dict(on["workflow_call"]["inputs"])


def documented_steps() -> list[tuple[str, dict[str, Any]]]:
    return [
        (doc.name, step)
        for doc in DOCS
        for block in yaml_blocks(doc.read_text())
        for step in uses_of_cpci(block)
    ]


def test_the_readme_uses_the_action_and_the_reusable_workflow() -> None:
    kinds = {USES.fullmatch(step["uses"])["path"] for _, step in documented_steps()}  # type: ignore[index]
    assert kinds >= {None, "/.github/workflows/cpci-shards.yml"}


@pytest.mark.parametrize(("doc", "step"), documented_steps(), ids=lambda v: str(v)[:40])
def test_each_documented_use_passes_only_inputs_that_exist(doc: str, step: dict[str, Any]) -> None:
    match = USES.fullmatch(step["uses"])
    assert match is not None
    assert match["ref"] == "v1", f"{doc}: pin the moving major tag, as docs/releasing.md says"
    inputs = declared_inputs(match["path"])
    passed = set(step.get("with") or {})
    unknown = passed - set(inputs)
    assert not unknown, f"{doc}: {step['uses']} has no input(s) {sorted(unknown)}"
    required = {n for n, spec in inputs.items() if spec.get("required") and "default" not in spec}
    assert required <= passed, f"{doc}: {step['uses']} needs {sorted(required - passed)}"


def _env(repo: Path) -> dict[str, str]:
    who = {
        f"GIT_{role}_{part}": value
        for role in ("AUTHOR", "COMMITTER")
        for part, value in (("NAME", "t"), ("EMAIL", "t@example.com"))
    }
    return {**who, "HOME": str(repo), "PATH": "/usr/bin:/bin"}


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=_env(repo))
    return done.stdout.strip()


def release(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = str(ROOT / "scripts" / "release.py")
    command = [sys.executable, script, "--repo", str(repo), *args]
    return subprocess.run(command, capture_output=True, text=True, env=_env(repo))


def test_release_tags_the_version_and_moves_v1_forward_only(tmp_path: Path) -> None:
    repo = tmp_path / "cpci"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    first = release(repo, "v1.0.0")
    assert first.returncode == 0, first.stderr
    assert "git push --force origin v1" in first.stdout
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    assert release(repo, "v1.1.0").returncode == 0
    head = _git(repo, "rev-parse", "HEAD")
    assert _git(repo, "rev-parse", "v1^{commit}") == _git(repo, "rev-parse", "v1.1.0^{commit}")
    assert _git(repo, "rev-parse", "v1^{commit}") == head
    older = release(repo, "v1.0.5")
    assert older.returncode == 2
    assert "not newer than v1.1.0" in older.stderr
    assert _git(repo, "rev-parse", "v1^{commit}") == head
    bad = release(repo, "1.2")
    assert (bad.returncode, "vMAJOR.MINOR.PATCH" in bad.stderr) == (2, True)
