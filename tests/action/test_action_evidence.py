"""The Action fetches the base branch's evidence from the live service before the tests and
hands it to pytest as a file (the tests never hold the Action's credential), with the paths the
pull request changed; a service that does not answer is a warning, and pytest gets no file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cpci.action.durations_fetch import choose_evidence, warning_line
from cpci.action.settings import ActionSettings
from cpci.action.suite_mode import pytest_command
from cpci.schema import EvidenceSummary, ResultRecord, RunEnvelope
from cpci.upload.service_client import ServiceClient
from tests.builders import REPO
from tests.live_server import serve_answers
from tests.upload.support import LiveService

NODEID = "test_suite.py::test_t"


def _event(tmp_path: Path, **payload: object) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "main"}, **payload}))
    return {"GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_PATH": str(event)}


def test_the_evidence_is_fetched_for_the_default_branch_and_passed_as_a_file(
    service: LiveService, tmp_path: Path
) -> None:
    seed = RunEnvelope(
        repository=REPO,
        commit="f" * 40,
        branch="main",
        ci_run_id="main-1",
        results=[ResultRecord(nodeid=NODEID, world_size=2, outcome="passed", duration_s=1.0)],
    )
    ServiceClient(service.url, service.token).upload(seed)
    settings = ActionSettings(server_url=service.url, token=service.token)
    choice = choose_evidence(settings, _event(tmp_path), lambda: service.token, cwd=tmp_path)
    assert choice.warning == ""
    assert choice.path == str(tmp_path / "cpci-results.jsonl.evidence.json")
    summary = EvidenceSummary.model_validate_json(Path(choice.path).read_text())
    assert summary.branch == "main"
    assert f"{NODEID}@2" in summary.configs
    command = pytest_command(settings, None, choice.path, choice.changed)
    assert f"--cpci-evidence={choice.path}" in command
    assert "--cpci-reruns-policy=adaptive" in command  # the Action's defaults
    assert "--cpci-new-config-runs=2" in command


def test_a_service_that_does_not_answer_is_a_warning(tmp_path: Path) -> None:
    with serve_answers(lambda request: (503, b'{"detail": "down"}')) as base:
        settings = ActionSettings(server_url=base, token="t")
        choice = choose_evidence(settings, _event(tmp_path), lambda: "t", cwd=tmp_path)
    assert choice.path is None
    assert "every failure is rerun (fixed reruns, at most 2)" in warning_line(choice)
    assert "--cpci-evidence" not in " ".join(pytest_command(settings, None, None, None))


def test_the_changed_paths_come_from_git_against_the_pull_requests_base(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "test_old.py").write_text("def test_a(): pass\n")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD")
    (tmp_path / "test_new.py").write_text("def test_b(): pass\n")
    git("add", "test_new.py")
    git("commit", "-q", "-m", "head")
    env = _event(tmp_path, pull_request={"base": {"sha": base}})
    choice = choose_evidence(ActionSettings(), env, lambda: None, cwd=tmp_path)
    assert choice.changed is not None
    assert Path(choice.changed).read_text().split() == ["test_new.py"]
    # A base the checkout lacks (a shallow clone) leaves them unknown.
    env = _event(tmp_path, pull_request={"base": {"sha": "0" * 40}})
    assert choose_evidence(ActionSettings(), env, lambda: None, cwd=tmp_path).changed is None
