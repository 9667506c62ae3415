"""The Action's test mode: run this shard through the batched runner and describe the outcome.

pytest runs as a child process with the runner's options; the results file is the source of
truth for everything after it (summary, annotations, outputs, upload), so what the job reports is
exactly what the service will store.

The code under test is the PR's, so it runs without cpci's credentials: pytest (and every
process it starts: the ranks, the library's own subprocesses) gets the job's environment less
cpci's inputs (`CPCI_INPUT_*`: the upload token, the `github-token` input) and GitHub's OIDC
token-request variables, with which any process could mint a token that uploads as this job.
cpci gets the token it needs before pytest starts (`HeldToken`), and its own process, which still
holds both, is out of the tests' reach (`process_guard`). A variable the workflow sets for its
tests itself (its own `GITHUB_TOKEN`, say) stays theirs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cpci.action.settings import ActionSettings
from cpci.action.workflow_commands import annotation
from cpci.github import markdown
from cpci.schema import FAILING_OUTCOMES, ResultRecord, final_records, read_results

#: Annotations GitHub shows per step; more are dropped, so the rest are summarised.
MAX_ANNOTATIONS = 10
#: Held back from the tests: the Action's inputs (action.yml passes each as CPCI_INPUT_<NAME>).
INPUT_PREFIX = "CPCI_INPUT_"
#: Held back from the tests: with these two, any process can mint an OIDC token for this job.
OIDC_REQUEST_VARIABLES = frozenset(
    {"ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL"}
)


@dataclass(frozen=True)
class SuiteOutcome:
    pytest_exit: int
    all_records: list[ResultRecord]  # every attempt, as the results file has them
    locations: dict[str, tuple[str, int]]  # nodeid -> (file, line) from the JUnit report
    started_at: datetime | None = None  # when pytest started and ended: when the shard ran
    ended_at: datetime | None = None

    @property
    def records(self) -> list[ResultRecord]:
        """The final record per config (a rerun replaces the first attempt)."""
        return final_records(self.all_records)

    @property
    def attempts(self) -> int:
        return len(self.all_records)

    @property
    def failing(self) -> list[ResultRecord]:
        return [r for r in self.records if r.outcome in FAILING_OUTCOMES]

    def counts(self) -> dict[str, int]:
        counts = Counter(r.outcome for r in self.records)
        return {
            "total": len(self.records),
            "passed": counts["passed"],
            "failed": len(self.failing),
            "flaky": sum(r.flaky for r in self.records),
        }


def pytest_command(
    settings: ActionSettings,
    durations: str | None = None,
    evidence: str | None = None,
    changed: str | None = None,
) -> list[str]:
    """pytest's command line for this shard; `durations` is the file every shard of the run
    balances by (None: the runner's own cache), `evidence` the base branch's evidence summary
    and `changed` the PR's changed paths (None: not fetched, not known)."""
    junit = f"{settings.results}.junit.xml"
    return [
        sys.executable,
        "-m",
        "pytest",
        *settings.tests.split(),
        *([f"--cpci-batch-size={settings.batch_size}"] if settings.batch_size else []),
        f"--cpci-workers={settings.workers}",
        # Reruns and isolation by default: a verdict needs same-commit evidence, and an
        # order-dependent failure must not pass for a flaky one.
        f"--cpci-reruns={settings.rerun_cap}",
        f"--cpci-reruns-policy={settings.reruns_policy}",
        f"--cpci-new-config-runs={settings.new_config_runs}",
        *([f"--cpci-evidence={evidence}"] if evidence else []),
        *([f"--cpci-changed-files={changed}"] if changed else []),
        "--cpci-isolate-failures",
        f"--cpci-shard={settings.shard_index}/{settings.shard_total}",
        *([f"--cpci-durations={durations}"] if durations else []),
        f"--cpci-results={settings.results}",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",  # xunit1 keeps file and line
        *settings.extra_pytest_args,
    ]


def test_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the tests run in: the job's, less cpci's inputs and the OIDC
    token-request variables."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith(INPUT_PREFIX) and name not in OIDC_REQUEST_VARIABLES
    }


def run_suite(
    settings: ActionSettings,
    cwd: Path | None = None,
    durations: str | None = None,
    evidence: str | None = None,
    changed: str | None = None,
) -> SuiteOutcome:
    """Run pytest in `test_environment` (its output goes straight to the job log) and read what
    it recorded."""
    command = pytest_command(settings, durations, evidence, changed)
    env = test_environment(os.environ)
    started = datetime.now(timezone.utc)
    code = subprocess.run(command, cwd=cwd, env=env, check=False).returncode
    ended = datetime.now(timezone.utc)
    base = cwd or Path.cwd()
    results = base / settings.results
    records = read_results(str(results)) if results.exists() else []
    locations = _locations(base / f"{settings.results}.junit.xml")
    return SuiteOutcome(code, records, locations, started, ended)


def _locations(junit: Path) -> dict[str, tuple[str, int]]:
    if not junit.exists():
        return {}
    out: dict[str, tuple[str, int]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        file, line = case.get("file"), case.get("line")
        if file and line:
            name = case.get("name", "")
            out[f"{file}::{name}"] = (file, int(line) + 1)  # pytest counts lines from 0
    return out


def failure_annotations(outcome: SuiteOutcome) -> list[str]:
    """One `::error` per failing config, a `::warning` per flaky one, capped as GitHub caps them."""
    lines = []
    for record in outcome.failing + [r for r in outcome.records if r.flaky]:
        level = "warning" if record.flaky else "error"
        label = "flaky" if record.flaky else record.outcome
        message = record.rank_errors[0].message if record.rank_errors else label
        file, line = _location(outcome, record.nodeid)
        title = f"cpci {label}: {record.nodeid} (world size {record.world_size})"
        lines.append(annotation(level, message, file=file, line=line, title=title))
    if len(lines) > MAX_ANNOTATIONS:
        rest = len(lines) - MAX_ANNOTATIONS + 1
        lines = [
            *lines[: MAX_ANNOTATIONS - 1],
            annotation("error", f"{rest} more: see the job summary"),
        ]
    return lines


def _location(outcome: SuiteOutcome, nodeid: str) -> tuple[str | None, int | None]:
    path = nodeid.split("::", 1)[0]
    for key, (file, line) in outcome.locations.items():
        # JUnit (xunit1) names a test by its function name with parameters; match on the tail.
        if key.split("::")[-1] == nodeid.split("::")[-1] and path.endswith(file):
            return file, line
    return (path or None), None


def summary(outcome: SuiteOutcome, settings: ActionSettings, report_url: str | None) -> str:
    """The job summary: counts, then each failing and flaky config with its first error line."""
    counts = outcome.counts()
    shard = f"shard {settings.shard_index + 1} of {settings.shard_total}"
    lines = [
        f"### cpci: {counts['total']} configs in {shard}",
        "",
        "| passed | failed | flaky | results (reruns included) |",
        "|---:|---:|---:|---:|",
        f"| {counts['passed']} | {counts['failed']} | {counts['flaky']} | {outcome.attempts} |",
        "",
    ]
    if outcome.pytest_exit not in (0, 1):
        lines += [
            f"pytest ended with exit code {outcome.pytest_exit} (not a test failure):"
            " see the job log.",
            "",
        ]
    rows = [r for r in outcome.records if r.outcome in FAILING_OUTCOMES or r.flaky]
    if rows:
        lines += ["| config | world | outcome | first error |", "|---|---:|---|---|"]
        for record in rows:
            message = record.rank_errors[0].message if record.rank_errors else ""
            label = "flaky" if record.flaky else record.outcome
            lines.append(
                f"| {markdown.table_code(record.nodeid, 200)} | {record.world_size} | {label} "
                f"| {markdown.text(message, 200)} |"
            )
        lines.append("")
    if report_url:
        lines += [markdown.link("Full report", report_url), ""]
    return "\n".join(lines) + "\n"
