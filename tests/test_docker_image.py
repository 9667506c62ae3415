"""The service image builds, starts, migrates, passes its own HEALTHCHECK and runs as non-root; its
Python dependencies come from a lock with hashes that covers pyproject, and its base goes by
digest (or is built locally from signed Debian packages), never by a tag alone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.prerequisites import missing
from tests.pyproject import pyproject

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("podman", "debootstrap", "curl")
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements" / "service.lock"


def test_image_builds_and_serves() -> None:
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        missing(
            "podman", f"no {', '.join(absent)} (apt-get install podman buildah runc debootstrap)"
        )
    if os.geteuid() != 0:
        missing("podman", "building the debootstrap base image needs root")
    result = subprocess.run(
        [str(ROOT / "scripts" / "docker-smoke.sh"), "cpci-service:test"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "smoke test passed" in result.stdout


def dockerfile_instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if not ln.lstrip().startswith("#")]
    return [i.strip() for i in "\n".join(lines).replace("\\\n", " ").splitlines() if i.strip()]


def locked() -> dict[str, tuple[Version, int]]:
    """requirements/service.lock: name -> (version, number of hashes)."""
    pins: dict[str, tuple[Version, int]] = {}
    for block in re.split(r"\n(?=\S)", LOCK.read_text()):
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if match:
            hashes = len(re.findall(r"--hash=sha256:[0-9a-f]{64}", block))
            pins[canonicalize_name(match[1])] = (Version(match[2]), hashes)
    return pins


def test_the_lock_pins_every_dependency_of_the_service_with_hashes() -> None:
    """What the image installs: pyproject's dependencies, its service extra and the build
    backend, each at one version that satisfies pyproject and with the hashes pip checks."""
    project = pyproject()
    wanted = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["service"],
        *project["build-system"]["requires"],
    ]
    pins = locked()
    assert all(hashes >= 1 for _, hashes in pins.values())
    for line in wanted:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in {LOCK.name}: run the command in its header"
        assert pins[name][0] in requirement.specifier, f"{name} {pins[name][0]} vs {line}"


def test_the_image_installs_the_lock_and_nothing_unhashed() -> None:
    installs = [i for i in dockerfile_instructions() if "pip install" in i]
    assert installs[0] == "RUN pip install --require-hashes --requirement service.lock"
    assert "COPY requirements/service.lock ./" in dockerfile_instructions()
    for other in installs[1:]:  # cpci itself: no index, no build isolation fetching setuptools
        assert "--no-deps" in other, other
        assert "--no-build-isolation" in other, other


@pytest.mark.parametrize(
    ("base", "allowed"),
    [
        ("python:3.11-slim-bookworm", False),
        ("docker.io/library/python:3.11-slim-bookworm", False),
        ("python:3.11-slim-bookworm@sha256:" + "0" * 64, True),
        ("localhost/cpci-base:bookworm", True),
    ],
)
def test_the_image_refuses_a_base_given_by_tag(base: str, allowed: bool) -> None:
    """The Dockerfile's own check, run as the build runs it."""
    [check] = [i for i in dockerfile_instructions() if i.startswith('RUN case "$BASE_IMAGE"')]
    script = check.removeprefix("RUN ")
    env = {"PATH": os.environ["PATH"], "BASE_IMAGE": base, "ALLOW_UNPINNED_BASE": "false"}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert (done.returncode == 0) == allowed, done.stderr
    if not allowed:
        assert f"BASE_IMAGE={base} is a tag" in done.stderr
        assert "see SECURITY.md" in done.stderr
        opted_in = {**env, "ALLOW_UNPINNED_BASE": "true"}
        assert subprocess.run(["sh", "-c", script], env=opted_in).returncode == 0
