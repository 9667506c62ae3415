"""The Action's venv (scripts/action_venv.py, as action.yml runs it): cpci's dependencies come
from the venv, torch from the runner, and nothing else an earlier job planted in the runner's
Python or pip config reaches it.

The "runner" is a real venv holding a fake torch (with a dependency of its own), a poisoned copy
of the dependency the installed app needs, a `.pth` file that runs code, and a pytest plugin.
The app and its dependency are real wheels installed by pip offline from a local folder. The same
setup with `--system-site-packages` (the old action.yml) imports the poisoned copy: the test
tells the two apart.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import subprocess
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "action_venv.py"
#: How action.yml starts the script with the runner's Python: no `site`, so no `.pth` runs.
FLAGS = ["-I", "-S"]
#: What the venv's Python reports about where each thing came from.
PROBE = """
import importlib.metadata as m, json, sys, torch, numpylike, probe_dep
print(json.dumps({
    "torch": torch.__file__, "torch_version": torch.VERSION, "numpylike": numpylike.__file__,
    "probe_dep": probe_dep.WHO, "probe_dep_file": probe_dep.__file__,
    "pytest11": sorted(e.name for e in m.entry_points(group="pytest11")),
    "evil_importable": __import__("importlib.util").util.find_spec("evilplugin") is not None,
}))
"""


def _wheel(
    folder: Path, name: str, version: str, files: dict[str, str], requires: str = ""
) -> None:
    """Write a minimal, valid wheel (what pip installs offline)."""
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += f"Requires-Dist: {requires}\n" if requires else ""
    contents = {
        **files,
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in contents.items():
            whl.writestr(path, text)
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")


def _installed(site: Path, name: str, version: str, files: dict[str, str], **meta: str) -> None:
    """Put a distribution straight into a site-packages folder, as `pip install` leaves it."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}"]
    lines += [f"Requires-Dist: {r}" for r in meta.get("requires", "").split(",") if r]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    if "entry_points" in meta:
        (info / "entry_points.txt").write_text(meta["entry_points"])
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    record = [*files, *(f"{info.name}/{f.name}" for f in info.iterdir()), f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in record))


def _index(root: Path, wheels: Path) -> str:
    """A PEP 503 index on disk for the wheels in `wheels` (what a runner's mirror would be)."""
    for whl in wheels.glob("*.whl"):
        project = root / whl.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        (project / "index.html").write_text(f'<a href="{whl.as_uri()}">{whl.name}</a>\n')
    return root.as_uri() + "/"


@dataclass(frozen=True)
class Runner:
    python: Path
    site: Path
    index: str
    home: Path

    def env(self, marker: Path) -> dict[str, str]:
        """pip offline, from the local index set for the runner (PIP_INDEX_URL), in a HOME
        whose pip.conf, planted by an earlier job, adds a folder with a newer, poisoned copy."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        return {
            **clean,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "PIP_INDEX_URL": self.index,
            "MARKER": str(marker),
        }


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    root = tmp_path_factory.mktemp("runner")
    venv.EnvBuilder(with_pip=False).create(root / "python")
    python = root / "python" / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    torch = {"torch/__init__.py": "VERSION = 'runner'\n"}
    _installed(site, "torch", "2.4.0", torch, requires="numpylike,optional-thing; extra == 'opt'")
    _installed(site, "numpylike", "1.0", {"numpylike/__init__.py": ""})
    # What an earlier (fork) job left: a shadowing copy of the app's dependency, a .pth that
    # runs code at every start, and a pytest plugin.
    _installed(site, "probe_dep", "0.0.1", {"probe_dep/__init__.py": "WHO = 'poisoned'\n"})
    (site / "evil.pth").write_text(
        "import os; m = os.environ.get('MARKER'); m and open(m, 'w').write('ran')\n"
    )
    plugin = {"evilplugin/__init__.py": ""}
    _installed(site, "evilplugin", "1.0", plugin, entry_points="[pytest11]\nevil = evilplugin\n")
    wheels = root / "wheels"
    wheels.mkdir()
    # The index set for the runner has the app and the good copy of its dependency.
    _wheel(wheels, "probe_dep", "1.0", {"probe_dep/__init__.py": "WHO = 'venv'\n"})
    _wheel(wheels, "probe_app", "1.0", {"probe_app/__init__.py": ""}, requires="probe_dep")
    # A planted user pip config pointing at a folder with a newer, poisoned probe_dep.
    evil_wheels = root / "evil-wheels"
    evil_wheels.mkdir()
    _wheel(evil_wheels, "probe_dep", "9.9", {"probe_dep/__init__.py": "WHO = 'pip.conf'\n"})
    home = root / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(f"[global]\nfind-links = {evil_wheels}\n")
    return Runner(python, site, _index(root / "simple", wheels), home)


def _probe(python: Path, env: dict[str, str]) -> dict[str, object]:
    """Import everything in the venv's Python, from a folder with nothing in it (`-c` puts the
    working directory first on sys.path)."""
    out = subprocess.run(
        [python, "-c", PROBE],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=python.parents[2],
    ).stdout
    result: dict[str, object] = json.loads(out)
    return result


def test_cpcis_dependencies_come_from_the_venv_and_torch_from_the_runner(
    runner: Runner, tmp_path: Path
) -> None:
    target, marker = tmp_path / "cpci-venv", tmp_path / "pth-ran"
    env = runner.env(marker)
    subprocess.run(
        [
            runner.python,
            *FLAGS,
            SCRIPT,
            target,
            "--install",
            "probe_app",
            "--runner-packages",
            "torch",
        ],
        check=True,
        env=env,
    )
    seen = _probe(target / "bin" / "python", env)
    assert seen["probe_dep"] == "venv"  # neither the runner's copy nor the pip.conf index
    assert str(seen["probe_dep_file"]).startswith(str(target))
    assert seen["torch_version"] == "runner"
    assert Path(str(seen["torch"])).resolve() == runner.site / "torch" / "__init__.py"
    assert Path(str(seen["numpylike"])).resolve().is_relative_to(runner.site)  # torch's own dep
    assert seen["pytest11"] == []  # the planted plugin is not found
    assert seen["evil_importable"] is False
    assert not marker.exists(), "the runner's .pth file ran in the cpci venv"


def test_the_old_system_site_packages_venv_is_poisoned(runner: Runner, tmp_path: Path) -> None:
    """The venv action.yml used to make, `--system-site-packages` from the runner's Python: the
    test above could fail. (The stand-in runner is itself a venv, whose children would see the
    base interpreter's site-packages instead, so its folder is added the way `site` adds the
    system one: `site.addsitedir`, after the venv's own, `.pth` files run.)"""
    target, marker = tmp_path / "old-venv", tmp_path / "pth-ran"
    env = runner.env(marker)
    venv.EnvBuilder(with_pip=True).create(target)
    site = subprocess.run(
        [
            target / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "system-site.pth").write_text(
        f"import site; site.addsitedir({str(runner.site)!r})\n"
    )
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "probe_app"]
    subprocess.run(pip, check=True, env=env, cwd=tmp_path)
    seen = _probe(target / "bin" / "python", env)
    assert seen["probe_dep"] == "poisoned"
    assert seen["pytest11"] == ["evil"]
    assert marker.exists()


def test_a_planted_pip_conf_poisons_an_install_that_reads_it(
    runner: Runner, tmp_path: Path
) -> None:
    """Why the script ignores pip config files: the same install reading them gets 9.9."""
    target = tmp_path / "reads-config"
    venv.EnvBuilder(with_pip=True).create(target)
    env = runner.env(tmp_path / "pth-ran")
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "probe_dep"]
    subprocess.run(pip, check=True, env=env)
    seen = subprocess.run(
        [target / "bin" / "python", "-c", "import probe_dep; print(probe_dep.WHO)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert seen == "pip.conf"


def test_action_yml_makes_its_venv_with_the_script() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s["name"] == "Install cpci")
    assert "--system-site-packages" not in step["run"]
    words = shlex.split(step["run"].replace("\\\n", " "), comments=True)
    assert "$CPCI_ACTION_PATH/scripts/action_venv.py" in words
    assert words[words.index("--install") + 1] == "$CPCI_ACTION_PATH[$extras]"
    assert "inputs." not in step["run"]  # inputs reach the script as env vars only
