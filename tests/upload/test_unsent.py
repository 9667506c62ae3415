"""An upload the service refuses for good (here a 409) is kept beside the results with the
service's answer, the step fails visibly, and `cpci upload --resend` sends it again once fixed;
against a live service over loopback HTTP, in real processes."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from cpci.schema import Outcome
from cpci.upload.unsent import read_unsent
from tests.builders import record
from tests.upload.support import LiveService, results_file, run_cpci, upload_args

RUN = "run-409"


def upload(service: LiveService, tmp_path: Path, name: str, outcome: Outcome) -> tuple[int, str]:
    """`cpci upload` of one result with `outcome`, as shard 0/1 of RUN; (exit code, stderr)."""
    results = results_file(tmp_path / name, [record(outcome=outcome)])
    args = upload_args(service, tmp_path, results, "--commit", "b" * 40, "--ci-run-id", RUN)
    done = run_cpci(tmp_path, *args)
    return done.returncode, done.stderr


def test_a_409_is_kept_beside_the_results_and_sent_again_once_fixed(
    service: LiveService, tmp_path: Path
) -> None:
    assert upload(service, tmp_path, "first.jsonl", "passed")[0] == 0
    code, err = upload(service, tmp_path, "second.jsonl", "failed")  # same shard, other content
    kept = tmp_path / "second.jsonl.unsent.json"
    assert code == 1
    assert f"the service refused run {RUN} attempt 1, shard 0/1 of acme/attn" in err
    assert "answered 409" in err
    assert "Nothing was stored" in err
    assert f"`cpci upload --resend {kept}`" in err
    unsent = read_unsent(kept)
    assert (unsent.status, unsent.server) == (409, service.url)
    assert "answered 409" in unsent.answer
    assert [r.outcome for r in unsent.envelope.results] == ["failed"]  # nothing lost
    resend = ["upload", "--resend", str(kept), "--server", service.url, "--token", service.token]
    resend += ["--spool", str(tmp_path / "spool")]
    again = run_cpci(tmp_path, *resend)
    assert again.returncode == 1  # the same body gets the same answer; the file stays
    assert read_unsent(kept).status == 409
    # The fix its answer names: a rerun uploads under a new attempt.
    body = json.loads(kept.read_text())
    body["envelope"]["ci_attempt"] = 2
    kept.write_text(json.dumps(body))
    fixed = run_cpci(tmp_path, *resend)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"removed {kept}" in fixed.stdout
    assert not kept.exists()
    runs = httpx.get(f"{service.url}/api/v1/repos/acme/attn/runs/{RUN}").json()
    assert runs["outcomes"] == {"failed": 1}  # attempt 2, the newest, is the run's


def test_a_file_that_is_not_a_kept_upload_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "r.jsonl.unsent.json"
    bad.write_text('{"schema": "cpci.unsent/1"}')
    done = run_cpci(tmp_path, "upload", "--resend", str(bad), "--server", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert f"{bad} is not an upload cpci kept (cpci.unsent/1)" in done.stderr
    assert "Traceback" not in done.stderr
