"""End to end over real HTTP: `cpci serve` (uvicorn) on 127.0.0.1, set up with the CLI as an
admin would, on both engines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cpci.cli import main
from cpci.server.devpg import free_port
from tests.builders import REPO, envelope, record, send
from tests.server.databases import ENGINES, fresh_database

DEADLINE_S = 30


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpci", *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(params=ENGINES)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A `cpci serve` process on an empty database (it migrates at start); base URL and env."""
    url = fresh_database(request.param, request, tmp_path, migrated=False)
    port = free_port()
    env = {**os.environ, "CPCI_DATABASE_URL": url, "CPCI_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "cpci", "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"cpci serve exited early:\n{process.stdout.read() if process.stdout else ''}"
                )
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"cpci serve did not answer /healthz within {DEADLINE_S} s")
            time.sleep(0.05)
        yield base, env
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def test_upload_and_read_over_http(served: tuple[str, dict[str, str]]) -> None:
    base, env = served
    made = cli("token", "create", REPO, "--name", "e2e", "--scope", "branch", "--json", env=env)
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    body = envelope([record("p2p"), record("a2a", "failed", message="boom")])
    with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
        assert send(http, body).status_code == 201
        assert send(http, body).json()["status"] == "duplicate"
        assert send(http, body, headers={"Authorization": ""}).status_code == 401
        summary = http.get(f"/api/v1/repos/{REPO}/runs/100").json()
        assert summary["outcomes"] == {"failed": 1, "passed": 1}
        metrics = http.get("/metrics").text
    assert 'cpci_uploads_total{status="stored"} 1.0' in metrics
    assert "cpci_results_ingested_total 2.0" in metrics
    assert 'route="/api/v1/uploads",status="201"' in metrics
    listed = cli("token", "list", REPO, env=env)
    assert "e2e\tactive" in listed.stdout


def test_db_cli_reports_and_applies_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CPCI_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    assert "at none (behind" in run("db", "current")[1]
    code, out, _ = run("db", "upgrade", "--revision", "0006")
    assert (code, "at 0006 (behind" in out) == (0, True)
    code, _, err = run("token", "create", REPO)  # behind, not empty: never upgraded unasked
    assert code == 1
    assert "run `cpci db upgrade`" in err
    code, out, _ = run("db", "upgrade")
    assert code == 0
    assert "up to date" in out
    code, _, err = run("token", "create", "not-a-repo")
    assert code == 2
    assert "OWNER/REPO" in err
    code, out, _ = run("token", "create", REPO, "--name", "ci")
    assert code == 0
    assert out.startswith("cpci_")
    assert run("token", "revoke", "1")[1] == "token 1 revoked\n"
    assert "ci\trevoked" in run("token", "list")[1]
