"""`cpci action` fetches the durations before planning: two shard jobs with different local
caches plan alike from the service's answer (disjoint, covering every test, one plan hash,
uploaded with the shards, no mismatch flagged); a service that does not answer is a warning and
the shard still runs."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx

from cpci import urls
from cpci.schema import ResultRecord, RunEnvelope
from cpci.upload.service_client import ServiceClient
from tests.builders import REPO
from tests.live_server import serve_handler
from tests.upload.support import LiveService, action_env, run_cpci

TESTS = 8
SUITE = f"""
import pytest
@pytest.mark.parametrize("i", range({TESTS}))
def test_t(i):
    pass
"""


def nodeid(i: int) -> str:
    return f"test_suite.py::test_t[{i}]"


def _job(
    folder: Path, cache: dict[str, float], server: str, token: str, shard: int
) -> dict[str, str]:
    """One shard job's checkout: the suite, this runner's own cache, the Action's inputs."""
    folder.mkdir()
    (folder / "test_suite.py").write_text(SUITE)
    cached = folder / ".pytest_cache" / "v" / "cpci"
    cached.mkdir(parents=True)
    (cached / "durations").write_text(json.dumps(cache))
    inputs = action_env(
        folder,
        tests="test_suite.py",
        server_url=server,
        token=token,
        shard_index=str(shard),
        shard_total="2",
        pytest_args="-rA",
    )
    event = folder / "event.json"
    event.write_text(json.dumps({"repository": {"default_branch": "trunk"}}))
    return {
        **inputs,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "e" * 40,
        "GITHUB_RUN_ID": "durations-1",
        "GITHUB_REF_NAME": "feature",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
        "RUNNER_TEMP": str(folder / "temp"),
    }


def _outputs(folder: Path) -> dict[str, str]:
    lines = (folder / "outputs.txt").read_text().splitlines()
    return {lines[i].split("<<")[0]: lines[i + 1] for i in range(0, len(lines), 3)}


def _passed(folder: Path) -> set[str]:
    records = [
        json.loads(line) for line in (folder / "cpci-results.jsonl").read_text().splitlines()
    ]
    return {r["nodeid"] for r in records if r["outcome"] == "passed"}


def test_two_shard_jobs_plan_alike_from_the_fetched_durations(
    service: LiveService, tmp_path: Path
) -> None:
    recorded = {nodeid(i): float(i + 1) for i in range(TESTS)}
    results = [
        ResultRecord(nodeid=n, world_size=1, outcome="passed", duration_s=s)
        for n, s in recorded.items()
    ]
    seed = RunEnvelope(
        repository=REPO, commit="f" * 40, branch="trunk", ci_run_id="trunk-1", results=results
    )
    ServiceClient(service.url, service.token).upload(seed)

    caches = [
        {n: 1.0 for n in recorded},
        {n: float(TESTS - i) ** 3 for i, n in enumerate(recorded)},
    ]
    jobs = [tmp_path / "job0", tmp_path / "job1"]
    for shard, (folder, cache) in enumerate(zip(jobs, caches, strict=True)):
        env = _job(folder, cache, service.url, service.token, shard)
        done = run_cpci(folder, "action", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        fetched_from = "the service (8 config(s), 1 run(s) of trunk)"
        assert f"cpci: shards balance by durations from {fetched_from}" in done.stdout
        # The answer stays as fetched (the run records its own timings in its cache).
        fetched = json.loads((folder / "cpci-results.jsonl.durations.json").read_text())
        assert fetched["durations"] == recorded
        assert fetched["branch"] == "trunk"  # the event's default branch, not the ref's

    first, second = (_passed(folder) for folder in jobs)
    assert first.isdisjoint(second)
    assert first | second == set(recorded)
    hashes = [_outputs(folder)["plan-hash"] for folder in jobs]
    assert hashes[0] == hashes[1]
    assert len(hashes[0]) == 64
    assert _outputs(jobs[0])["durations-from"].startswith("the service")
    run = httpx.get(service.url + urls.api_run_summary(REPO, "durations-1")).json()
    assert run["run"]["shards"]["complete"] is True
    assert run["run"]["shards"]["plan_mismatches"] == []


class _Down(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(503, "maintenance")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_a_service_that_does_not_answer_is_a_warning_and_the_shard_runs(tmp_path: Path) -> None:
    with serve_handler(_Down) as url:
        folder = tmp_path / "job"
        env = _job(folder, {}, url, "t", 0)
        done = run_cpci(folder, "action", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::warning title=cpci durations::durations not fetched" in done.stdout
    assert "answered 503" in done.stdout
    assert "cpci: shards balance by durations from pytest's cache" in done.stdout
    assert _outputs(folder)["durations-from"] == "pytest's cache"
    assert len(_passed(folder)) == TESTS // 2
