"""`cpci upload` end to end: files in, a live service over loopback HTTP, a receipt out; outside
CI the commit and branch from git, a run id of its own and the shard's times from its files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from cpci import urls
from cpci.cli import main
from cpci.schema import ShardPlan
from tests.builders import REPO, record
from tests.upload.support import LiveService, git, git_checkout, results_file, run_cpci

SHA = "c" * 40


def _results_file(tmp_path: Path) -> Path:
    records = [
        record("p2p", "passed"),
        record("a2a", "failed", world_size=4),
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


def test_a_local_upload_takes_commit_and_branch_from_git_and_a_run_id_of_its_own(
    service: LiveService, tmp_path: Path
) -> None:
    checkout = tmp_path / "attn"
    commit = git_checkout(checkout)
    results = _results_file(checkout)
    plan = ShardPlan(shard_index=0, shard_total=1, plan_hash="0" * 64, configs=2)
    # The plan the runner writes as it plans, and its results as they end, at known times.
    (checkout / "results.jsonl.plan.json").write_text(plan.model_dump_json(by_alias=True))
    os.utime(checkout / "results.jsonl.plan.json", (1_750_000_000, 1_750_000_000))
    os.utime(results, (1_750_000_090, 1_750_000_090))
    args = ["--results", "results.jsonl", "--repository", REPO, "--server", service.url]
    args += ["--token", service.token, "--spool", str(tmp_path / "spool")]
    done = run_cpci(checkout, "upload", *args)
    assert done.returncode == 0, done.stderr
    run_id = "local-20250615T150810Z"  # when the shard ended: its results file's time
    assert done.stderr.splitlines()[:3] == [
        "cpci upload: the shard ran 2025-06-15 15:06:40 to 2025-06-15 15:08:10 UTC (its files' "
        "times)",
        f"cpci upload: commit {commit[:12]} and branch trial from git in {checkout}",
        f"cpci upload: ci-run-id {run_id}: a local upload (no --ci-run-id or GITHUB_RUN_ID); "
        "pass --ci-run-id ID to upload several shards into one run",
    ]
    assert f"run page: {service.url}/ui/{REPO}/runs/{run_id}\n" in done.stdout
    page = httpx.get(f"{service.url}/ui/{REPO}/runs/{run_id}").text
    assert "not run by GitHub Actions" in page  # no link to a GitHub run that is not there
    detail = httpx.get(f"{service.url}{urls.api_run_detail(REPO, run_id)}").json()
    assert (detail["run"]["commit"], detail["run"]["branch"]) == (commit, "trial")
    (shard,) = detail["shards"]
    assert (shard["started_at"], shard["ended_at"]) == (
        "2025-06-15T15:06:40Z",
        "2025-06-15T15:08:10Z",
    )
    again = run_cpci(checkout, "upload", *args, "--json")  # the same file again: the same run
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["receipt"]["status"] == "duplicate"
    assert summary["run_url"] == f"{service.url}/ui/{REPO}/runs/{run_id}"
    assert summary["run_api_url"] == f"{service.url}{urls.api_run_summary(REPO, run_id)}"


def test_git_fills_only_what_the_flags_leave_out_and_says_when_the_checkout_is_dirty(
    service: LiveService, tmp_path: Path
) -> None:
    checkout = tmp_path / "attn"
    commit = git_checkout(checkout)
    (checkout / "tracked.py").write_text("x = 1\n")
    git(checkout, "add", "tracked.py")  # staged, not committed
    results = str(_results_file(checkout))
    base = ["upload", "--results", results, "--repository", REPO, "--server", service.url]
    base += ["--token", service.token, "--spool", str(tmp_path / "spool")]
    dirty = run_cpci(checkout, *base, "--ci-run-id", "601", "--branch", "mine")
    assert dirty.returncode == 0, dirty.stderr
    assert (
        f"cpci upload: commit {commit[:12]} from git in {checkout} (which has uncommitted "
        "changes: the results may not be of that commit alone)" in dirty.stderr
    )
    assert "ci-run-id" not in dirty.stderr
    other = run_cpci(checkout, *base, "--ci-run-id", "602", "--commit", SHA)
    assert other.returncode == 0, other.stderr
    assert "from git" not in other.stderr  # another commit: HEAD's branch is not its branch
    runs = {
        run: httpx.get(f"{service.url}{urls.api_run_summary(REPO, run)}").json()["run"]
        for run in ("601", "602")
    }
    assert (runs["601"]["commit"], runs["601"]["branch"]) == (commit, "mine")
    assert (runs["602"]["commit"], runs["602"]["branch"]) == (SHA, None)
