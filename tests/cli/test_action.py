"""`cpci action` as action.yml runs it: every problem is one `::error` line naming what to fix
and exit 2, never a traceback; the service being down in report mode is such a problem."""

from __future__ import annotations

from pathlib import Path

from tests.builders import REPO
from tests.github.fake_github import FakeGitHub
from tests.live_server import loopback_socket
from tests.upload.support import action_env, run_cpci


def test_a_bad_input_fails_the_step_naming_the_input(tmp_path: Path) -> None:
    done = run_cpci(tmp_path, "action", env=action_env(tmp_path, workers="0", comment="loud"))
    assert done.returncode == 2
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("::error")]
    assert line.startswith("::error title=cpci action::bad cpci action input: ")
    assert "workers: Input should be greater than or equal to 1" in line
    assert "comment: Input should be 'edit', 'new-on-regression' or 'off'" in line


def test_report_mode_without_a_github_token_says_which_input(tmp_path: Path) -> None:
    inputs = action_env(tmp_path, mode="report", server_url="http://127.0.0.1:9", token="t")
    done = run_cpci(tmp_path, "action", env={**inputs, "GITHUB_REPOSITORY": REPO})
    assert done.returncode == 2
    assert "Traceback" not in done.stdout + done.stderr
    assert "mode report needs github-token" in done.stdout


def test_report_mode_without_a_pull_request_says_how_to_give_one(tmp_path: Path) -> None:
    inputs = action_env(
        tmp_path, mode="report", server_url="http://127.0.0.1:9", token="t", github_token="g"
    )
    done = run_cpci(tmp_path, "action", env={**inputs, "GITHUB_REPOSITORY": REPO})
    assert done.returncode == 2
    assert "::error title=cpci report::report mode needs a pull request" in done.stdout
    assert "`pull-request` input" in done.stdout


def test_report_mode_with_the_service_down_names_the_url(tmp_path: Path) -> None:
    fake = FakeGitHub(tokens={"ghs_job": "github-actions[bot]"})
    fake.add_pull(REPO, 7, head_sha="c" * 40, base_sha="b" * 40, files=[("modified", "t.py")])
    sock = loopback_socket()  # bound, never listening: connections are refused
    try:
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
        inputs = action_env(
            tmp_path,
            mode="report",
            server_url=down,
            token="t",
            github_token="ghs_job",
            pull_request="7",
        )
        with fake.serve() as api:
            job = {"GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": api}
            done = run_cpci(tmp_path, "action", env={**inputs, **job})
    finally:
        sock.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"::error title=cpci report::no answer from {down}/api/v1/repos/{REPO}/pulls/7" in (
        done.stdout
    )
    assert fake.comments.get((REPO, 7), []) == []  # nothing half-published
