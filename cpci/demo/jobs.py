"""One CI job of the demo: a shard of the CP suite at one commit, run by the real runner.

Runs as the Action runs it (isolated failures, its default reruns, its pool of worlds); the
output goes to a log per job, and the runner's progress lines are echoed with the job's name,
since jobs run two at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpci.action.settings import ActionSettings
from cpci.demo.history import HISTORY, Commit
from cpci.schema import ResultRecord, final_records, read_results

#: Same-commit reruns, as the Action makes them by default without a server-url (the demo's
#: jobs fetch no evidence): what turns a transient failure into same-commit flaky evidence and a
#: repeatable one into a failure.
RERUNS: int = ActionSettings().rerun_cap
#: Seconds between the runner's progress lines.
PROGRESS_S = 5

Say = Callable[[str], None]


@dataclass(frozen=True)
class Job:
    commit: Commit
    shard: int

    @property
    def name(self) -> str:
        return f"{self.commit.label} shard {self.shard + 1}/{self.commit.shards}"


@dataclass(frozen=True)
class JobRun:
    """A finished job: the results file it wrote and what it holds."""

    job: Job
    results: Path
    records: list[ResultRecord]
    seconds: float

    def summary(self) -> str:
        """What the job's configs came to (their final records), then its reruns apart: a
        results file holds every attempt, and a rerun is not another config."""
        final = final_records(self.records)
        flaky = sum(r.flaky for r in final)
        reruns = [r for r in self.records if r.attempt > 1]
        rerun_configs = len({r.config_key for r in reruns})
        again = f"{len(reruns)} rerun(s) of {rerun_configs} config(s): {_counts(reruns)}"
        return (
            f"{self.job.name}: {len(final)} config(s): {_counts(final)} ({flaky} flaky); "
            f"{again if reruns else 'no reruns'}; in {self.seconds:.0f} s"
        )


def _counts(records: list[ResultRecord]) -> str:
    outcomes = Counter(r.outcome for r in records)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))


def jobs() -> list[Job]:
    """Every job of the history, oldest commit first."""
    return [Job(commit, shard) for commit in HISTORY for shard in range(commit.shards)]


def pytest_command(job: Job, results: Path) -> list[str]:
    commit = job.commit
    return [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "cpci.suites.cp",
        *(["-k", commit.keyword] if commit.keyword else []),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "cpci.runner.plugin",
        "-p",
        "cpci.demo.faults",
        f"--cpci-shard={job.shard}/{commit.shards}",
        f"--cpci-results={results}",
        "--cpci-isolate-failures",
        f"--cpci-reruns={RERUNS}",
        f"--cpci-progress-interval={PROGRESS_S}",
    ]


def run_job(job: Job, workdir: Path, say: Say) -> JobRun:
    """Run `job` (pytest in a child process); raises if pytest itself broke (exit code > 1)."""
    commit = job.commit
    results = workdir / f"results-{commit.run_id}-{job.shard}.jsonl"
    # One fault folder per commit: the flaky config fails once per commit, whichever shard.
    faults_dir = workdir / f"faults-{commit.run_id}"
    faults_dir.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "CPCI_DEMO_DIR": str(faults_dir),
        "CPCI_DEMO_FAULTS": commit.faults,
        # The suite needs no other plugin, and the venv's (hypothesis, schemathesis) cost
        # seconds of start-up in pytest and in the ranks' preloaded interpreter.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    what = f"-k '{commit.keyword}'" if commit.keyword else "the whole CP suite"
    say(f"{job.name} ({commit.sha[:8]}): {what}")
    started = time.monotonic()
    log_path = workdir / f"pytest-{commit.run_id}-{job.shard}.log"
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            pytest_command(job, results),
            env=env,
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert child.stdout is not None
        for line in child.stdout:
            log.write(line)
            if line.startswith("cpci: "):
                say(f"{job.name}: {line.removeprefix('cpci: ').rstrip()}")
        code = child.wait()
    if code not in (0, 1) or not results.exists():
        raise RuntimeError(f"pytest exited with {code} for {job.name}; see {log_path}")
    return JobRun(job, results, read_results(str(results)), time.monotonic() - started)
