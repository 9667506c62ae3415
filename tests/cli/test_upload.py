"""`cpci upload` end to end: files in, a live service over loopback HTTP, a receipt out."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cpci.cli import main
from tests.upload.support import REPO, LiveService, record, results_file

SHA = "c" * 40


def _results_file(tmp_path: Path) -> Path:
    records = [
        record("tests/test_cp.py::test_attn[p2p]", "passed", world_size=2),
        record("tests/test_cp.py::test_attn[a2a]", "failed", world_size=4),
    ]
    return results_file(tmp_path / "results.jsonl", records)


def _junit(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "good.xml"
    good.write_text(
        '<testsuites><testsuite name="s"><testcase classname="a.B" name="c"/>'
        "</testsuite></testsuites>"
    )
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuites><testsuite>")
    return good, bad


def test_upload_results_and_junit_with_one_malformed_file(
    service: LiveService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CPCI_TOKEN", service.token)
    good, bad = _junit(tmp_path)
    code = main(
        [
            "upload",
            "--server",
            service.url,
            "--results",
            str(_results_file(tmp_path)),
            "--junit",
            str(good),
            str(bad),
            "--repository",
            REPO,
            "--commit",
            SHA,
            "--ci-run-id",
            "501",
            "--shard",
            "1/2",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 1  # uploaded, but a file was skipped: the workflow should show it
    assert "bad.xml:1:" in captured.err
    assert "not well-formed XML" in captured.err
    receipt = json.loads(captured.out)["receipt"]
    assert (receipt["status"], receipt["results"], receipt["shard_index"]) == ("stored", 3, 1)
    assert receipt["shards"]["text"] == "1/2 shards reported"
    run = httpx.get(f"{service.url}/api/v1/repos/{REPO}/runs/501").json()
    assert run["configs"] == 3


def test_upload_defaults_from_github_actions_pull_request_event(
    service: LiveService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "number": 9,
                "pull_request": {
                    "number": 9,
                    "head": {"sha": "d" * 40, "ref": "feature"},
                    "base": {"sha": "e" * 40},
                },
            }
        )
    )
    for name, value in {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "f" * 40,
        "GITHUB_RUN_ID": "777",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "CPCI_SERVER": service.url,
        "CPCI_TOKEN": service.token,
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["upload", "--results", str(_results_file(tmp_path))]) == 0
    assert "stored: 2 result(s) of acme/attn run 777 shard 0 (1/1 shards reported)" in (
        capsys.readouterr().out
    )
    report = httpx.get(f"{service.url}/api/v1/repos/{REPO}/pulls/9/report").json()
    assert report["head_commit"] == "d" * 40
    assert report["baseline"]["requested_commit"] == "e" * 40


def test_refused_and_unreachable_uploads_say_why(
    service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "upload",
        "--results",
        str(_results_file(tmp_path)),
        "--repository",
        REPO,
        "--commit",
        SHA,
        "--ci-run-id",
        "502",
    ]
    assert main([*args, "--server", service.url, "--token", "cpci_wrong"]) == 1
    assert "answered 401" in capsys.readouterr().err
    spool = tmp_path / "spool"
    unreachable = ["--server", "http://127.0.0.1:9", "--token", "t", "--retries", "1"]
    assert main([*args, *unreachable, "--spool", str(spool)]) == 3
    err = capsys.readouterr().err
    assert f"SPOOLED to {spool}" in err
    assert "no answer from http://127.0.0.1:9" in err
    assert "`cpci upload --flush` (or the next upload) sends it" in err
    assert len(list(spool.glob("upload-*.json"))) == 1
