"""The demo: the whole cpci loop on this machine, on CPU, in a few minutes.

1. a result service on embedded SQLite (a real `cpci serve` on 127.0.0.1);
2. the bundled CP attention suite, batched through the runner on gloo, as 2 shards, for a "main"
   commit and for a "PR" commit that carries an injected regression and a flaky config
   (`cpci.demo.faults`); each shard uploaded like a CI job would;
3. the PR comment the bot would post, printed, and the web UI's URLs; the UI stays up until Ctrl-C.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from cpci.schema import RunEnvelope, read_results
from cpci.upload.environment import detect
from cpci.upload.send import Backoff, deliver
from cpci.upload.spool import Spool

REPOSITORY = "demo/cp-attention"
MAIN_SHA = "1a2b3c4d5e6f708192a3b4c5d6e7f80912a3b4c5"
PR_SHA = "9f8e7d6c5b4a39281706f5e4d3c2b1a098f7e6d5"
PR_NUMBER = 1
SHARDS = 2
#: The ring forgets the head-tail layout past rank 1; one 2-rank config fails on its first attempt.
PR_FAULTS = "ring-balance,flaky=test_cp2[a2a-full-cont-fp32-bshd-mha]"


@dataclass(frozen=True)
class Commit:
    label: str
    sha: str
    run_id: str
    faults: str
    branch: str
    pull_request: int | None = None
    base: str | None = None


COMMITS = (
    Commit("main", MAIN_SHA, "1001", "", "main"),
    Commit(f"PR #{PR_NUMBER}", PR_SHA, "1002", PR_FAULTS, "fix-ring", PR_NUMBER, MAIN_SHA),
)

Say = Callable[[str], None]


def _say(text: str) -> None:
    print(f"[cpci demo] {text}", flush=True)


class Service:
    """A `cpci serve` child process on a fresh SQLite database."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "CPCI_DATABASE_URL": f"sqlite:///{workdir / 'cpci.db'}",
            "CPCI_HOST": "127.0.0.1",
            "CPCI_PORT": str(port),
        }
        self.log = open(workdir / "service.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cpci", "serve"],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"cpci serve exited; see {self.log.name}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"cpci serve did not answer within {timeout_s:g} s; see {self.log.name}")

    def create_token(self) -> str:
        # The demo uploads main's history as well as the PR: a branch-scoped token.
        command = [sys.executable, "-m", "cpci", "token", "create", REPOSITORY, "--json"]
        command += ["--scope", "branch"]
        made = subprocess.run(command, env=self.env, capture_output=True, text=True, check=True)
        return str(json.loads(made.stdout)["token"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()


def run_shard(workdir: Path, commit: Commit, shard: int, say: Say) -> Path:
    """One CI job: the CP suite's shard through the batched runner, results to a file."""
    results = workdir / f"results-{commit.run_id}-{shard}.jsonl"
    env = {**os.environ, "CPCI_DEMO_DIR": str(workdir), "CPCI_DEMO_FAULTS": commit.faults}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "cpci.suites.cp",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "cpci.demo.faults",
        f"--cpci-shard={shard}/{SHARDS}",
        f"--cpci-results={results}",
        "--cpci-isolate-failures",
        "--cpci-batch-size=32",
        "--cpci-progress-interval=15",
        "-o",
        "console_output_style=count",
    ]
    say(f"{commit.label} ({commit.sha[:8]}), shard {shard + 1}/{SHARDS}: the CP suite, batched")
    code = subprocess.run(command, env=env, cwd=workdir).returncode
    if code not in (0, 1):
        raise RuntimeError(f"pytest exited with {code} for {commit.label} shard {shard}")
    return results


def upload(server: str, token: str, commit: Commit, shard: int, results: Path, say: Say) -> None:
    records = read_results(str(results))
    envelope = RunEnvelope(
        repository=REPOSITORY,
        commit=commit.sha,
        branch=commit.branch,
        pull_request=commit.pull_request,
        base_commit=commit.base,
        ci_run_id=commit.run_id,
        shard_index=shard,
        shard_total=SHARDS,
        runner_name=f"demo-runner-{shard}",
        runner_labels=["self-hosted", "cpu", "demo"],
        environment=detect(records),
        results=records,
    )
    done = deliver(
        server, lambda: token, envelope, spool=Spool(results.parent / "spool"), backoff=Backoff()
    )
    if done.receipt is None:
        raise RuntimeError(f"upload failed: {done.error}")
    say(f"uploaded {done.receipt.results} results: {done.receipt.shards.text}")


def pr_comment(server: str) -> str:
    from cpci.github.comment import CommentOptions, render
    from cpci.upload.service_client import ServiceClient

    report = ServiceClient(server, None).pull_report(REPOSITORY, PR_NUMBER)
    if report is None:
        raise RuntimeError(f"the service has no report for {REPOSITORY}#{PR_NUMBER}")
    return render(
        report,
        None,
        CommentOptions(service_url=server),
        repository=REPOSITORY,
        pull_request=PR_NUMBER,
    )


def main(workdir: Path, port: int, wait: bool, say: Say = _say) -> int:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    started = time.monotonic()
    service = Service(workdir, port)
    try:
        service.wait_ready()
        token = service.create_token()
        say(f"service up on {service.url} (SQLite in {workdir / 'cpci.db'})")
        for commit in COMMITS:
            for shard in range(SHARDS):
                results = run_shard(workdir, commit, shard, say)
                upload(service.url, token, commit, shard, results, say)
        say(f"all 4 shards uploaded in {time.monotonic() - started:.0f} s")
        print("\n" + "=" * 30 + " the PR comment cpci would post " + "=" * 30)
        print(pr_comment(service.url))
        print("=" * 92 + "\n")
        from cpci import urls

        say(f"dashboard: {service.url}{urls.dashboard(REPOSITORY)}")
        say(f"PR report: {service.url}{urls.pull(REPOSITORY, PR_NUMBER)}")
        if wait:
            say("the web UI stays up until Ctrl-C")
            try:
                service.process.wait()
            except KeyboardInterrupt:
                say("stopping")
        return 0
    finally:
        service.stop()
