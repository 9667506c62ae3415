"""`cpci culprit OWNER/REPO CONFIG [--branch B] [--dispatch]`: which commit broke a config on a
trusted branch.

Prints the service's answer (`GET .../culprit`, `cpci.schema.CulpritRange`): the last commit it
passed on, the first it failed on and the commits between that never ran it. With `--dispatch`
it asks GitHub (`cpci.github.culprit.next_bisection_run`, through the one GitHub client) to run
the caller's workflow on the branch for the range's midpoint; the reusable workflow's `culprit`
job runs just that config at that commit, uploads it, and dispatches the next step, until one
commit is left.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cpci.cli.service_access import (
    CommandError,
    add_service_options,
    github_token,
    refused,
    repository,
    service_client,
)

if TYPE_CHECKING:
    from cpci.schema.culprit import CulpritRange

#: The caller's workflow file the example tells users to copy (workflows/example-cp-repo.yml).
DEFAULT_WORKFLOW = "cpci.yml"
#: Untested commits listed in full before the rest are counted.
SHOWN = 10


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "culprit",
        help="name the commit that broke a config on a trusted branch, and bisect to it",
        description="Example: cpci culprit my-org/my-repo 'tests/test_cp.py::test_ring@4' "
        "--server https://cpci.example.com; with --dispatch (GITHUB_TOKEN with actions: write) "
        "GitHub runs the config at the middle of the range, until one commit is left.",
    )
    parser.add_argument("repository", metavar="OWNER/REPO")
    parser.add_argument("config", help="the config id: NODEID@WORLD_SIZE")
    parser.add_argument(
        "--branch", default=None, help="a trusted branch (default: the service's default one)"
    )
    parser.add_argument(
        "--dispatch",
        action="store_true",
        help="run the config at the range's midpoint through the repository's workflow",
    )
    parser.add_argument(
        "--workflow",
        default=DEFAULT_WORKFLOW,
        help=f"--dispatch: the workflow file calling cpci-shards (default {DEFAULT_WORKFLOW})",
    )
    parser.add_argument(
        "--ref", default=None, help="--dispatch: the ref it runs on (default: the branch)"
    )
    parser.add_argument(
        "--github-token", default=None, help="--dispatch: GitHub token (or GITHUB_TOKEN)"
    )
    parser.add_argument(
        "--github-api-url", default=None, help="--dispatch: GitHub's API (or GITHUB_API_URL)"
    )
    add_service_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.upload.errors import UploadError, UploadFailed

    try:
        repo = repository(args.repository)
        token = github_token(args.github_token) if args.dispatch else ""
        client = service_client(args)
        try:
            found = client.culprit(repo, args.config, args.branch)
        except UploadFailed as exc:
            raise refused(exc, f"reading {args.config}'s culprit", writes=False) from exc
        print(found.model_dump_json(indent=2, by_alias=True) if args.json else describe(found))
        if args.dispatch:
            print(_dispatch(found, args, token))
    except CommandError as exc:
        print(f"cpci culprit: {exc}", file=sys.stderr)
        return exc.exit_code
    except UploadError as exc:  # a bad --server / --token setting
        print(f"cpci culprit: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def describe(found: CulpritRange) -> str:
    """The range as a person reads it: the verdict, then last good, first bad, untested."""
    lines = [f"{found.config} on {found.branch}: {found.status}", f"  {found.reason}"]
    if found.last_good:
        lines.append(f"  last good: {found.last_good}")
    if found.first_bad:
        lines.append(f"  first bad: {found.first_bad}")
    if found.untested:
        lines.append(f"  never ran between them ({len(found.untested)}, oldest first):")
        lines += [f"    {c}" for c in found.untested[:SHOWN]]
        if len(found.untested) > SHOWN:
            lines.append(f"    ... and {len(found.untested) - SHOWN} more")
    if found.culprit:
        lines.append(f"  culprit: {found.culprit}")
    elif (mid := found.midpoint()) is not None:
        lines.append(f"  next to run: {mid} (cpci culprit --dispatch runs it)")
    return "\n".join(lines)


def _dispatch(found: CulpritRange, args: argparse.Namespace, token: str) -> str:
    import os

    from cpci.github.auth import TokenAuth
    from cpci.github.client import API_URL, GitHubClient
    from cpci.github.culprit import next_bisection_run
    from cpci.github.errors import GitHubError

    api = args.github_api_url or os.environ.get("GITHUB_API_URL") or API_URL
    ref = args.ref or found.branch
    try:
        with GitHubClient(TokenAuth(token), api_url=api) as gh:
            step = next_bisection_run(found, gh, workflow=args.workflow, ref=ref)
    except GitHubError as exc:
        raise CommandError(
            f"dispatching {args.workflow} on {ref} in {found.repository}: {exc} (the token "
            f"needs actions: write, and {args.workflow} must have a workflow_dispatch trigger "
            "with the culprit-config and culprit-commit inputs: see workflows/example-cp-repo.yml)"
        ) from exc
    return step.message
