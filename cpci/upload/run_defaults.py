"""What `cpci upload` takes when neither its flags nor the CI's variables describe the run.

Outside CI nothing sets GITHUB_SHA or GITHUB_RUN_ID, and a first try should not need them: the
commit and branch come from git in the working directory (the checkout the tests ran in), and
the run gets an id of its own, `local-<when the shard ended>`, which GitHub never gives (its run
ids are numbers), so the run page links no GitHub run for it. The same results file uploaded
again gets the same id: a retry is a duplicate, not a second run. Every default taken is said on
stderr; what has no default (the repository) stays for `envelope.missing` to name.

The shard's own times come from its files in CI too: the runner writes the plan beside the
results file as it plans and each result as it ends, so their modification times say when the
shard ran, and the service plots the results there rather than at the upload.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from cpci.schema import plan_path
from cpci.upload.envelope import RunFields

#: The prefix of the run ids local uploads get (GitHub's run ids are numbers).
LOCAL_RUN_PREFIX = "local-"


@dataclass(frozen=True)
class Checkout:
    """The git checkout at a folder: its HEAD commit and branch (None when detached), or why
    there is none."""

    folder: Path
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    why: str = ""


@dataclass(frozen=True)
class Defaulted:
    """The fields with the defaults taken, what was taken (lines for stderr), and why a field
    that is still missing has no default (for `envelope.missing`)."""

    fields: RunFields
    notes: list[str]
    why: dict[str, str]


def git_checkout(folder: Path) -> Checkout:
    """HEAD of the git checkout at `folder`; never raises (no git, not a checkout: `why`)."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=30, check=False
        )

    try:
        head = git("rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            if "not a git repository" in head.stderr:
                return Checkout(folder, why=f"{folder} is not in a git checkout")
            return Checkout(folder, why=f"the git checkout at {folder} has no commit yet")
        branch = git("symbolic-ref", "--quiet", "--short", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
    except FileNotFoundError:
        return Checkout(folder, why="no git on PATH to read the commit from")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Checkout(folder, why=f"git failed in {folder} ({exc})")
    return Checkout(
        folder,
        commit=head.stdout.strip(),
        branch=branch.stdout.strip() if branch.returncode == 0 else None,
        dirty=bool(status.stdout.strip()),
    )


def shard_times(results: Sequence[str]) -> tuple[datetime | None, datetime | None]:
    """When the shard ran: its plan file's time (written as it planned, before any config ran)
    and its results file's (written as each config ended); None for a file that is not there."""
    ended = _latest([Path(path) for path in results])
    started = _latest([Path(plan_path(path)) for path in results])
    if started is not None and ended is not None and started > ended:
        started = None  # a plan rewritten after the results: not this shard's start
    return started, ended


def _latest(paths: Sequence[Path]) -> datetime | None:
    times = [path.stat().st_mtime for path in paths if path.is_file()]
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


def local_defaults(
    fields: RunFields, results: Sequence[str], *, cwd: Path, now: datetime
) -> Defaulted:
    """`fields` (already resolved over the CI's variables) with the shard's times, and where they
    are still missing the commit and branch of the git checkout at `cwd` and a local run id
    (from the shard's end, else `now`)."""
    notes: list[str] = []
    why: dict[str, str] = {}
    started, ended = shard_times(results)
    if fields.started_at is None and fields.ended_at is None and ended is not None:
        fields = replace(fields, started_at=started, ended_at=ended)
        span = f"{started:%Y-%m-%d %H:%M:%S} to " if started else "until "
        notes.append(f"the shard ran {span}{ended:%Y-%m-%d %H:%M:%S} UTC (its files' times)")
    if fields.commit is None or fields.branch is None:
        checkout = git_checkout(cwd)
        if fields.commit is None and checkout.commit is None:
            why["commit"] = checkout.why
        fields, note = _git_defaults(fields, checkout)
        notes += [note] if note else []
    if fields.ci_run_id is None:
        run_id = f"{LOCAL_RUN_PREFIX}{(fields.ended_at or now):%Y%m%dT%H%M%SZ}"
        fields = replace(fields, ci_run_id=run_id)
        notes.append(
            f"ci-run-id {run_id}: a local upload (no --ci-run-id or GITHUB_RUN_ID); pass "
            "--ci-run-id ID to upload several shards into one run"
        )
    return Defaulted(fields, notes, why)


def _git_defaults(fields: RunFields, checkout: Checkout) -> tuple[RunFields, str]:
    """`fields` with the commit and branch of `checkout` where they are missing, and a note of
    what was taken ("" for nothing). A branch is HEAD's only for HEAD's commit."""
    if checkout.commit is None or fields.commit not in (None, checkout.commit):
        return fields, ""
    took = [f"commit {checkout.commit[:12]}"] if fields.commit is None else []
    if fields.branch is None and checkout.branch:
        took.append(f"branch {checkout.branch}")
    if not took:
        return fields, ""
    note = f"{' and '.join(took)} from git in {checkout.folder}"
    if fields.commit is None and checkout.dirty:
        note += " (which has uncommitted changes: the results may not be of that commit alone)"
    branch = fields.branch or checkout.branch
    return replace(fields, commit=checkout.commit, branch=branch), note
