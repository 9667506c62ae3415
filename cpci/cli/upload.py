"""`cpci upload`: send one shard's results (cpci JSON lines and/or JUnit XML) to the service.

A malformed JUnit file is reported by name and skipped; the rest are still uploaded, and the
exit code is then 1 so the workflow shows it. Exit 2: nothing valid to upload or bad flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "upload",
        help="upload results to the cpci service",
        description="Example: cpci upload --results results.jsonl --junit reports/*.xml "
        "--server https://cpci.example.com (token from CPCI_TOKEN; in GitHub Actions the "
        "repository, commit, PR and run ids default from the environment)",
    )
    parser.add_argument("--results", action="append", default=[], metavar="FILE",
                        help="cpci results file (JSON lines), repeatable")  # fmt: skip
    parser.add_argument("--junit", nargs="+", default=[], metavar="FILE", help="JUnit XML files")
    parser.add_argument("--server", default=None, help="service URL (or CPCI_SERVER)")
    parser.add_argument("--token", default=None, help="upload token (or CPCI_TOKEN)")
    parser.add_argument("--repository", help="OWNER/REPO (or GITHUB_REPOSITORY)")
    parser.add_argument("--commit", help="commit sha (or the PR head / GITHUB_SHA)")
    parser.add_argument("--branch", help="branch (or GITHUB_REF_NAME)")
    parser.add_argument("--pull-request", type=int, help="PR number (or from the event)")
    parser.add_argument("--base-commit", help="PR base commit (or from the event)")
    parser.add_argument("--ci-run-id", help="CI run id (or GITHUB_RUN_ID)")
    parser.add_argument("--ci-attempt", type=int, help="CI run attempt (or GITHUB_RUN_ATTEMPT)")
    parser.add_argument("--shard", help="INDEX/TOTAL, 0-based (or CPCI_SHARD); default 0/1")
    parser.add_argument("--runner-name", help="runner name (or RUNNER_NAME)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.schema import ResultRecord, read_results
    from cpci.upload.envelope import EnvelopeError, RunFields, build_envelope
    from cpci.upload.junit import JUnitError, read_junit
    from cpci.upload.send import UploadFailed, send_envelope

    records: list[ResultRecord] = []
    problems: list[str] = []
    for path in args.results:
        try:
            records += read_results(path)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    for path in args.junit:
        try:
            records += read_junit(path)
        except JUnitError as exc:
            problems.append(str(exc))
    for problem in problems:
        print(f"cpci upload: skipped {problem}", file=sys.stderr)
    if not args.results and not args.junit:
        print("cpci upload: give --results FILE and/or --junit FILE...", file=sys.stderr)
        return 2
    server = args.server or os.environ.get("CPCI_SERVER")
    token = args.token or os.environ.get("CPCI_TOKEN")
    if not server or not token:
        missing = "--server (or CPCI_SERVER)" if not server else "--token (or CPCI_TOKEN)"
        print(f"cpci upload: {missing} is required", file=sys.stderr)
        return 2
    fields = RunFields(
        repository=args.repository, commit=args.commit, branch=args.branch,
        pull_request=args.pull_request, base_commit=args.base_commit, ci_run_id=args.ci_run_id,
        ci_attempt=args.ci_attempt, shard=args.shard, runner_name=args.runner_name,
    )  # fmt: skip
    try:
        envelope = build_envelope(fields, records, os.environ)
        receipt = send_envelope(server, token, envelope)
    except (EnvelopeError, UploadFailed) as exc:
        print(f"cpci upload: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, EnvelopeError) else 1
    if args.json:
        print(json.dumps({"receipt": receipt, "skipped": problems}))
    else:
        shards = receipt.get("shards", {})
        print(
            f"{receipt['status']}: {receipt['results']} result(s) of {receipt['repository']} run "
            f"{receipt['ci_run_id']} shard {receipt['shard_index']} "
            f"({shards.get('text', '')}); {len(problems)} file(s) skipped"
        )
    return 1 if problems else 0
