"""The durations this job's shard balances by and the evidence its reruns are decided by,
fetched from the service before planning.

Every shard job of a CI run must plan from the same durations, or the shards may drop a config
or run one twice; each job's own pytest cache differs. So before pytest starts, the Action asks
the service once for the branch's durations (`GET .../durations`), writes the answer beside the
results file and hands that one file to pytest (`--cpci-durations FILE`). The branch is the
`durations-branch` input, else the repository's default branch from the event payload, else the
service's choice. A fetch that fails is a warning: the shard still runs, balanced by this
runner's cache, and the plan hash it uploads lets the report flag the run if its shards disagree.

The evidence summary (`GET .../evidence?branch=B`, the same branch) is fetched the same way and
handed over as `--cpci-evidence FILE`: the tests run without the Action's credential, so the
runner could not fetch it itself. A fetch that fails is a warning: the runner then reruns every
failure (fixed reruns, at fixed's cap). The paths the pull request changed (`git diff` against
the event's base commit, when the checkout holds it) go to `--cpci-changed-files`, for new
configs' runs.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from cpci.action.settings import ActionSettings
from cpci.action.workflow_commands import annotation
from cpci.evidence import DEFAULT_CAPS
from cpci.upload.errors import UploadError
from cpci.upload.retry import ONCE
from cpci.upload.service_client import ServiceClient

#: The fetch happens before planning: a slow service must not hold every shard long.
FETCH_TIMEOUT_S = 20.0
#: Where the fetched durations go, next to the results file.
SUFFIX = ".durations.json"
#: Where the fetched evidence and the changed paths go, next to the results file.
EVIDENCE_SUFFIX = ".evidence.json"
CHANGED_SUFFIX = ".changed.txt"


@dataclass(frozen=True)
class DurationsChoice:
    """What pytest gets as `--cpci-durations` (None: its own cache) and what the log says."""

    path: str | None
    source: str
    warning: str = ""


def choose_durations(
    settings: ActionSettings,
    environ: Mapping[str, str],
    token: Callable[[], str | None],
    *,
    cwd: Path,
) -> DurationsChoice:
    """The durations for this shard, per the `durations` input: `service` fetches them (when
    there is a service), `cache` keeps pytest's cache, anything else is a file to use."""
    if settings.durations == "cache":
        return DurationsChoice(None, "pytest's cache")
    if settings.durations != "service":
        return DurationsChoice(settings.durations, settings.durations)
    if not settings.server_url:
        return DurationsChoice(None, "pytest's cache (no server-url)")
    repository = environ.get("GITHUB_REPOSITORY", "")
    if not repository:
        warning = "durations not fetched: GITHUB_REPOSITORY is not set; balancing by the cache"
        return DurationsChoice(None, "pytest's cache", warning)
    out = cwd / f"{settings.results}{SUFFIX}"
    fetched = _fetch_beside_results(
        settings, environ, repository, token, out, ServiceClient.durations
    )
    if isinstance(fetched, UploadError):
        warning = (
            f"durations not fetched ({fetched}); this shard balances by the runner's pytest "
            "cache, so other shards may plan differently (the report flags it if they do)"
        )
        return DurationsChoice(None, "pytest's cache", warning)
    answer, path = fetched
    where = f"{answer.runs} run(s) of {answer.branch}" if answer.branch else "no runs yet"
    return DurationsChoice(str(path), f"the service ({len(answer.durations)} config(s), {where})")


@dataclass(frozen=True)
class EvidenceChoice:
    """What pytest gets as `--cpci-evidence` (None: no service, or the fetch failed: `warning`)
    and `--cpci-changed-files` (None: not known)."""

    path: str | None
    changed: str | None = None
    warning: str = ""


def choose_evidence(
    settings: ActionSettings,
    environ: Mapping[str, str],
    token: Callable[[], str | None],
    *,
    cwd: Path,
) -> EvidenceChoice:
    """The base branch's evidence and the PR's changed paths, each written beside the results."""
    changed = _changed_paths(environ, cwd, cwd / f"{settings.results}{CHANGED_SUFFIX}")
    repository = environ.get("GITHUB_REPOSITORY", "")
    if not settings.server_url or not repository:
        return EvidenceChoice(None, changed)
    out = cwd / f"{settings.results}{EVIDENCE_SUFFIX}"
    fetched = _fetch_beside_results(
        settings, environ, repository, token, out, ServiceClient.evidence
    )
    if isinstance(fetched, UploadError):
        warning = (
            f"evidence not fetched ({fetched}); every failure is rerun (fixed reruns, at most "
            f"{DEFAULT_CAPS['fixed']}) and only the changed files' configs get new-config runs"
        )
        return EvidenceChoice(None, changed, warning)
    return EvidenceChoice(str(fetched[1]), changed)


Answer = TypeVar("Answer", bound=BaseModel)


def _fetch_beside_results(
    settings: ActionSettings,
    environ: Mapping[str, str],
    repository: str,
    token: Callable[[], str | None],
    out: Path,
    fetch: Callable[[ServiceClient, str, str | None], Answer],
) -> tuple[Answer, Path] | UploadError:
    """One GET of the branch's `fetch` answer (once, bounded: it runs before planning), written
    to `out` for pytest to read; the error instead when the service could not answer."""
    branch = settings.durations_branch or default_branch(environ) or None
    try:
        client = ServiceClient(settings.server_url, token(), retry=ONCE, timeout_s=FETCH_TIMEOUT_S)
        answer = fetch(client, repository, branch)
    except UploadError as exc:
        return exc
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(answer.model_dump_json(by_alias=True), encoding="utf-8")
    return answer, out


def _changed_paths(environ: Mapping[str, str], cwd: Path, out: Path) -> str | None:
    """The paths the pull request changed, from `git diff` against its base commit (named by
    the event), written to `out`; None outside a pull request or when the checkout lacks the
    base commit (a shallow clone: `fetch-depth: 0` gives it)."""
    base = _event(environ).get("pull_request", {}).get("base", {}).get("sha")
    if not isinstance(base, str):
        return None
    done = subprocess.run(
        ["git", "diff", "--name-only", f"{base}...HEAD"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(done.stdout, encoding="utf-8")
    return str(out)


def warning_line(choice: DurationsChoice | EvidenceChoice) -> str:
    """The job log's `::warning` for a fetch that failed; empty when none did."""
    title = "cpci durations" if isinstance(choice, DurationsChoice) else "cpci evidence"
    return annotation("warning", choice.warning, title=title) if choice.warning else ""


def default_branch(environ: Mapping[str, str]) -> str:
    """The repository's default branch, as the triggering event's payload names it."""
    repository = _event(environ).get("repository")
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return branch if isinstance(branch, str) else ""


def _event(environ: Mapping[str, str]) -> dict[str, Any]:
    """The triggering event's payload ({} when there is none or it cannot be read)."""
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return payload if isinstance(payload, dict) else {}
