"""`cpci fork-pull`: the pull request a fork's workflow run was for (the fork-results workflow).

Runs in a `workflow_run` job of the base repository: reads the event (GITHUB_EVENT_PATH), the
numbers the shards wrote (`*.pull` files under `--claims`, the downloaded artifacts), asks
GitHub with GITHUB_TOKEN (GITHUB_API_URL) and writes `number`, `base` (the base commit) and
`base-ref` (the base branch) to $GITHUB_OUTPUT. Exit 1 with an `::error` when no single pull
request has the run's head repository, branch and commit (see `cpci.github.fork_pull`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

#: A PR number is short; a claim file is read no further than this.
CLAIM_BYTES = 20


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "fork-pull",
        help="tell which pull request a fork's workflow run was for (workflow_run jobs)",
        description="Used by workflows/cpci-fork-results.yml: writes number, base and base-ref "
        "to $GITHUB_OUTPUT, or fails saying why no single pull request matches.",
    )
    parser.add_argument(
        "--claims",
        default=None,
        metavar="DIR",
        help="the downloaded artifacts: every *.pull file under DIR names a candidate (checked)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.action.workflow_commands import annotation, write_outputs
    from cpci.github.auth import TokenAuth
    from cpci.github.client import API_URL, GitHubClient
    from cpci.github.errors import GitHubError
    from cpci.github.fork_pull import ForkPullError, RunHead, resolve_fork_pull

    def fail(message: str) -> int:
        print(annotation("error", message, title="cpci fork results"), flush=True)
        return 1

    repo, token = os.environ.get("GITHUB_REPOSITORY", ""), os.environ.get("GITHUB_TOKEN", "")
    event = os.environ.get("GITHUB_EVENT_PATH", "")
    if not (repo and token and event):
        return fail("needs GITHUB_REPOSITORY, GITHUB_EVENT_PATH and GITHUB_TOKEN (a workflow job)")
    try:
        head = RunHead.from_event(json.loads(Path(event).read_text(encoding="utf-8")))
        with GitHubClient(
            TokenAuth(token), api_url=os.environ.get("GITHUB_API_URL", API_URL)
        ) as gh:
            pull = resolve_fork_pull(gh, repo, head, _claims(args.claims))
    except (OSError, ValueError) as exc:  # ForkPullError is a ValueError
        return fail(str(exc) if isinstance(exc, ForkPullError) else f"cannot read {event}: {exc}")
    except GitHubError as exc:
        return fail(str(exc))
    write_outputs(
        os.environ.get("GITHUB_OUTPUT"),
        {"number": str(pull.number), "base": pull.base_sha, "base-ref": pull.base_ref},
    )
    print(
        f"cpci: the run of {head.repository}:{head.branch} is #{pull.number} into {pull.base_ref}"
    )
    return 0


def _claims(folder: str | None) -> set[int]:
    """The numbers the shards wrote; what is not a number (a hostile artifact) is skipped."""
    if not folder:
        return set()
    numbers = set()
    for path in sorted(Path(folder).rglob("*.pull")):
        try:
            with path.open("rb") as fh:
                text = fh.read(CLAIM_BYTES).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.isdigit():
            numbers.add(int(text))
    return numbers
