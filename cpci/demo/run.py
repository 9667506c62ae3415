"""The demo: the whole cpci loop on this machine, on CPU, in about a minute and a half.

1. a result service on embedded SQLite (a real `cpci serve` on 127.0.0.1), booting while the
   first suite runs;
2. the bundled CP attention suite, run by the real runner on gloo, for the history of
   `cpci.demo.history`: four main commits (first-parent links recorded, so the service knows
   their order) and a PR with an injected regression; each job's results uploaded like a CI
   job's, in history order;
3. what the service made of it: the PR comment the bot would post, the history the dashboard
   shows (runs, flaky configs), the URLs of the dashboard, a config's timeline, the flaky list
   and the PR page, and the total time; the UI stays up until Ctrl-C.
"""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx

from cpci import urls
from cpci.demo.history import BASE, MAIN, PR_NUMBER, REPOSITORY, first_parent_links
from cpci.demo.jobs import JobRun, Say, jobs, run_job
from cpci.demo.service import Service
from cpci.schema import RunEnvelope
from cpci.upload.environment import detect
from cpci.upload.run_defaults import shard_times
from cpci.upload.send import Backoff, deliver
from cpci.upload.service_client import ServiceClient
from cpci.upload.spool import Spool

#: Jobs at once: a job is single-threaded part of the time (start-up, collection, a world's
#: start), so two keep two cores busier than one (measured on two loaded cores: a commit's two
#: shards took 28 s at once, 46 s one after the other).
PARALLEL = 2


_PRINTING = threading.Lock()


def _say(text: str) -> None:
    with _PRINTING:  # jobs report from their own threads: one line at a time
        print(f"[cpci demo] {text}", flush=True)


def upload(server: str, token: str, done: JobRun, say: Say) -> None:
    """Upload one job's results as its CI job would, with when it ran (`cpci upload`'s way)."""
    commit, shard = done.job.commit, done.job.shard
    started, ended = shard_times([str(done.results)])
    envelope = RunEnvelope(
        repository=REPOSITORY,
        commit=commit.sha,
        branch=commit.branch,
        pull_request=commit.pull_request,
        base_commit=commit.base,
        ci_run_id=commit.run_id,
        shard_index=shard,
        shard_total=commit.shards,
        runner_name=f"demo-runner-{shard}",
        runner_labels=["self-hosted", "cpu", "demo"],
        environment=detect(done.records),
        started_at=started,
        ended_at=ended,
        results=done.records,
    )
    spool = Spool(done.results.parent / "spool")
    sent = deliver(server, lambda: token, envelope, spool=spool, backoff=Backoff())
    if sent.receipt is None:
        raise RuntimeError(f"upload of {done.job.name} failed: {sent.error}")
    say(f"{done.summary()}; uploaded: {sent.receipt.shards.text}")


def pr_comment(server: str) -> str:
    from cpci.github.comment import CommentOptions, render

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


def show_history(server: str, say: Say) -> str:
    """Say what the dashboard shows of main's history; returns the flaky config's key.

    Raises when the history is not all there: the demo exists to show it.
    """
    from cpci.server.views.read_models import Dashboard

    response = httpx.get(server + urls.api_dashboard(REPOSITORY), timeout=30)
    response.raise_for_status()
    dashboard = Dashboard.model_validate_json(response.content)
    trend = ", ".join(
        f"{row.run.commit[:8]} {row.pass_rate:.1%}" if row.pass_rate is not None else "-"
        for row in reversed(dashboard.runs)
    )
    say(f"dashboard: {len(dashboard.runs)} runs of {dashboard.branch}, pass rate {trend}")
    if len(dashboard.runs) != len(MAIN) or not dashboard.flaky:
        raise RuntimeError(
            f"the dashboard shows {len(dashboard.runs)} main run(s) (expected {len(MAIN)}) and "
            f"{len(dashboard.flaky)} flaky config(s) (expected some); see the service's log"
        )
    for row in dashboard.flaky:
        say(f"flaky: {row.config}: {row.reason}")
    return dashboard.flaky[0].config


def _run_history(service: Service, parallel: int, say: Say) -> int:
    """Run every job (`parallel` at once) and upload each in history order; returns the count."""
    todo = jobs()
    with ThreadPoolExecutor(parallel, thread_name_prefix="demo-job") as pool:
        futures: list[Future[JobRun]] = [
            pool.submit(run_job, job, service.database.parent, say) for job in todo
        ]
        try:
            service.wait_ready()
            token = service.create_token()
            say(f"service up on {service.url} (SQLite in {service.database})")
            recorded = ServiceClient(service.url, token).record_commits(
                REPOSITORY, first_parent_links(), branch="main"
            )
            say(f"recorded {recorded} first-parent link(s) of main")
            for future in futures:
                upload(service.url, token, future.result(), say)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return len(todo)


def main(workdir: Path, port: int, wait: bool, say: Say = _say, parallel: int = PARALLEL) -> int:
    if parallel < 1:
        raise ValueError(f"--jobs must be >= 1, got {parallel}")
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    started = time.monotonic()

    def timed(text: str) -> None:
        say(f"{time.monotonic() - started:5.1f} s  {text}")

    service = Service(workdir, port)
    try:
        count = _run_history(service, parallel, timed)
        timed(f"{count} jobs for {len(MAIN) + 1} commits run and uploaded")
        print("\n" + "=" * 30 + " the PR comment cpci would post " + "=" * 30)
        print(pr_comment(service.url))
        print("=" * 92 + "\n")
        flaky = show_history(service.url, timed)
        dashboard = service.url + urls.dashboard(REPOSITORY)
        say(f"dashboard (pass-rate trend): {dashboard}")
        say(f"flaky list: {dashboard}#flaky-h (JSON: {service.url}{urls.api_flaky(REPOSITORY)})")
        say(f"a config's timeline: {service.url}{urls.config(REPOSITORY, flaky)}")
        say(f"PR report (based on {BASE.label}): {service.url}{urls.pull(REPOSITORY, PR_NUMBER)}")
        say(f"done in {time.monotonic() - started:.0f} s")
        if wait:
            say("the web UI stays up until Ctrl-C")
            try:
                service.process.wait()
            except KeyboardInterrupt:
                say("stopping")
        return 0
    finally:
        service.stop()
