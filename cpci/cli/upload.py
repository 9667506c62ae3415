"""`cpci upload`: send one shard's results (cpci JSON lines and/or JUnit XML) to the service.

A malformed JUnit file is reported by name and skipped; the rest are still uploaded, and the
exit code is then 1 so the workflow shows it. Exit 2: nothing valid to upload or bad flags.
Exit 3: the service could not take it now; the upload waits in the spool (nothing is lost) and
`cpci upload --flush`, or the next upload to the same server for the same repository, sends it.
Exit 1 also when the service refused the upload for good (a 409, 403, ...): nothing was stored,
and the upload is kept beside the first results file (`RESULTS.unsent.json`) with the answer,
for `cpci upload --resend FILE` once the cause is fixed.
A `--results` file that does not exist is an empty shard (the runner writes none when every
config was deselected or none was collected): it is uploaded with no results, so the report does
not wait for it forever. After a branch run's upload the checkout's first-parent history is sent
too (the base fallback for PRs needs it); without git this is skipped with a note.
Outside CI the commit and branch come from git in the working directory and the run gets an id
of its own (`cpci.upload.run_defaults`), each default said on stderr; whatever is still missing
is named all at once. The run's page is printed as an absolute URL (`run_url` with `--json`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpci.schema import ResultRecord
    from cpci.upload.retry import Backoff
    from cpci.upload.settings import UploadSettings
    from cpci.upload.shard_upload import ShardUpload


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "upload",
        help="upload results to the cpci service",
        description="Example: cpci upload --results results.jsonl --junit reports/*.xml "
        "--server https://cpci.example.com (token from CPCI_TOKEN; in GitHub Actions the "
        "repository, commit, PR and run ids default from the environment)",
    )
    parser.add_argument(
        "--results",
        action="append",
        default=[],
        metavar="FILE",
        help="cpci results file (JSON lines), repeatable",
    )
    parser.add_argument("--junit", nargs="+", default=[], metavar="FILE", help="JUnit XML files")
    parser.add_argument("--server", default=None, help="service URL (or CPCI_SERVER)")
    parser.add_argument("--token", default=None, help="upload token (or CPCI_TOKEN)")
    parser.add_argument(
        "--auth",
        default=None,
        help="token (default, or CPCI_AUTH) or oidc: a GitHub Actions OIDC token "
        "(needs `permissions: id-token: write`)",
    )
    parser.add_argument(
        "--oidc-audience",
        default=None,
        help="OIDC audience (or CPCI_OIDC_AUDIENCE; default: the --server URL, the service's)",
    )
    parser.add_argument(
        "--spool",
        default=None,
        metavar="DIR",
        help="where uploads wait while the service is down (or CPCI_SPOOL; "
        "default $RUNNER_TEMP/cpci-spool in GitHub Actions, else "
        "~/.cache/cpci/spool)",
    )
    parser.add_argument(
        "--flush",
        action="store_true",
        help="only send the spooled uploads for this server and repo",
    )
    parser.add_argument(
        "--resend",
        default=None,
        metavar="FILE",
        help="send again an upload the service refused, kept in FILE (RESULTS.unsent.json); "
        "the file is removed once the service has it",
    )
    parser.add_argument("--retries", type=int, default=5, help="tries per upload (default 5)")
    parser.add_argument("--repository", help="OWNER/REPO (or GITHUB_REPOSITORY)")
    parser.add_argument("--commit", help="commit sha (the PR's head, or GITHUB_SHA)")
    parser.add_argument("--branch", help="branch (or GITHUB_REF_NAME)")
    parser.add_argument("--pull-request", type=int, help="PR number (or from the event)")
    parser.add_argument("--base-commit", help="PR base commit (or from the event)")
    parser.add_argument(
        "--base-branch",
        help="the branch the PR merges into (or GITHUB_BASE_REF / the event): its trusted runs "
        "are the PR's baseline",
    )
    parser.add_argument(
        "--merge-commit",
        help="the merge commit GitHub made of the PR into its base, which the job tested (or "
        "GITHUB_SHA on pull_request events; a pull_request OIDC token's `sha`)",
    )
    parser.add_argument("--ci-run-id", help="CI run id (or GITHUB_RUN_ID)")
    parser.add_argument("--ci-attempt", type=int, help="CI run attempt (or GITHUB_RUN_ATTEMPT)")
    parser.add_argument("--shard", help="INDEX/TOTAL, 0-based (or CPCI_SHARD); default 0/1")
    parser.add_argument("--runner-name", help="runner name (or RUNNER_NAME)")
    parser.add_argument(
        "--leg",
        default=None,
        help="matrix leg (or CPCI_LEG): a name, or a JSON list of runner labels, stored sorted "
        "and comma-joined; the Action passes its runner labels in a matrix. Two legs' same "
        "shard index are two shards",
    )
    parser.add_argument(
        "--legs",
        default=None,
        help="every leg of the matrix (or CPCI_LEGS), a JSON list of names or of runner-label "
        "lists: a declared leg that never uploads is reported missing",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.upload.errors import UploadError

    try:
        if args.resend:
            return _resend(args)
        return _flush(args) if args.flush else _upload(args)
    except UploadError as exc:
        print(f"cpci upload: {exc}", file=sys.stderr)
        return exc.exit_code


def _settings(args: argparse.Namespace) -> UploadSettings:
    from cpci.upload.settings import UploadSettings

    return UploadSettings.from_flags(
        server=args.server,
        token=args.token,
        auth=args.auth,
        oidc_audience=args.oidc_audience,
        spool=args.spool,
    )


def _backoff(args: argparse.Namespace) -> Backoff:
    from cpci.upload.retry import Backoff

    return Backoff(attempts=max(1, args.retries))


def _flush(args: argparse.Namespace) -> int:
    from cpci.upload.send import flush
    from cpci.upload.settings import UploadSettingsError
    from cpci.upload.spool import Binding, Spool

    settings = _settings(args)
    server = settings.require_server()
    repository = args.repository or os.environ.get("GITHUB_REPOSITORY")
    if not repository:
        raise UploadSettingsError(
            "--flush needs --repository (or GITHUB_REPOSITORY): only that repository's spooled "
            "uploads are sent with these credentials"
        )
    binding = Binding.for_job(server, repository, os.environ)
    spool = Spool(settings.spool)
    done = flush(spool, binding, settings.token_source(os.environ), backoff=_backoff(args))
    _print_notes(done.notes)
    _print_rejected(done.rejected)
    print(f"flushed {len(done.receipts)} spooled upload(s); {done.left} still in {spool.directory}")
    return 3 if done.left else (1 if done.rejected else 0)


def _upload(args: argparse.Namespace) -> int:
    from cpci.upload.envelope import RunFields, build_envelope, missing, resolve
    from cpci.upload.plan_file import plan_for
    from cpci.upload.run_defaults import local_defaults
    from cpci.upload.settings import UploadSettingsError
    from cpci.upload.shard_upload import upload_shard
    from cpci.upload.unsent import unsent_path

    settings = _settings(args)
    flags = RunFields(
        repository=args.repository,
        commit=args.commit,
        branch=args.branch,
        pull_request=args.pull_request,
        base_commit=args.base_commit,
        base_branch=args.base_branch,
        merge_commit=args.merge_commit,
        ci_run_id=args.ci_run_id,
        ci_attempt=args.ci_attempt,
        shard=args.shard,
        runner_name=args.runner_name,
        leg=args.leg,
        legs=args.legs,
    )
    defaulted = local_defaults(
        resolve(flags, os.environ),
        args.results,
        cwd=Path.cwd(),
        now=datetime.now(timezone.utc),
    )
    absent = [] if settings.server else ["--server (or CPCI_SERVER)"]
    if settings.auth == "token" and settings.token is None:
        absent.append("--token (or CPCI_TOKEN; `cpci token create OWNER/REPO` makes one)")
    if not args.results and not args.junit:
        absent.append("--results FILE or --junit FILE (or --flush)")
    absent += missing(defaulted.fields, defaulted.why)
    if absent:
        named = ", ".join(absent[:-1]) + " and " if len(absent) > 1 else ""
        raise UploadSettingsError(f"missing {named}{absent[-1]}")
    _print_notes(defaulted.notes)
    records, problems = _read_records(args.results, args.junit)
    envelope = build_envelope(defaulted.fields, records, os.environ, plan_for(args.results))
    keep = unsent_path((args.results or args.junit)[0])
    done = upload_shard(
        settings, envelope, os.environ, backoff=_backoff(args), cwd=Path.cwd(), keep=keep
    )
    delivered = done.delivered
    _report(args, settings, done, problems)
    if delivered.receipt is None:
        return 3
    return 1 if problems or delivered.rejected else 0


def _report(
    args: argparse.Namespace, settings: UploadSettings, done: ShardUpload, problems: list[str]
) -> None:
    """Print what the upload did: the receipt, or where it waits; `--json` for a machine."""
    delivered = done.delivered
    _print_notes(delivered.notes + ([done.ancestry] if done.ancestry else []))
    _print_rejected(delivered.rejected)
    receipt = delivered.receipt
    if args.json:
        summary = {
            "receipt": receipt.model_dump(mode="json") if receipt else None,
            "run_url": settings.service_url(receipt.run_url) if receipt else None,
            "run_api_url": settings.service_url(receipt.run_api_url) if receipt else None,
            "spooled": str(delivered.spooled) if delivered.spooled else None,
            "flushed": [receipt.model_dump(mode="json") for receipt in delivered.flushed],
            "still_spooled": delivered.still_spooled,
            "rejected": delivered.rejected,
            "skipped": problems,
            "notes": delivered.notes,
            "ancestry": done.ancestry,
        }
        print(json.dumps(summary))
    elif receipt is None:
        print(
            f"cpci upload: SPOOLED to {delivered.spooled}: {delivered.error}. Nothing is lost: "
            f"`cpci upload --flush` (or the next upload) sends it "
            f"({delivered.still_spooled} upload(s) waiting)",
            file=sys.stderr,
        )
    else:
        if delivered.flushed:
            print(f"sent {len(delivered.flushed)} upload(s) waiting in {settings.spool}")
        print(
            f"{receipt.status}: {receipt.results} result(s) of {receipt.repository} run "
            f"{receipt.ci_run_id} shard {receipt.shard_index} "
            f"({receipt.shards.text}); {len(problems)} file(s) skipped"
        )
        print(f"run page: {settings.service_url(receipt.run_url)}")


def _resend(args: argparse.Namespace) -> int:
    """Send a kept (refused) upload again, as it is; the file goes once the service has it."""
    from cpci.upload.settings import UploadSettingsError
    from cpci.upload.shard_upload import upload_shard
    from cpci.upload.unsent import read_unsent

    if args.flush or args.results or args.junit:
        raise UploadSettingsError("--resend FILE sends that file alone: drop --flush/--results")
    path = Path(args.resend)
    kept = read_unsent(path)
    settings = _settings(args)
    print(f"cpci upload: sending again {kept.upload}, refused by {kept.server}: {kept.answer}")
    done = upload_shard(
        settings, kept.envelope, os.environ, backoff=_backoff(args), cwd=Path.cwd(), keep=path
    )
    _report(args, settings, done, [])
    if done.delivered.receipt is None:
        return 3
    path.unlink(missing_ok=True)
    print(f"cpci upload: the service has it now; removed {path}")
    return 1 if done.delivered.rejected else 0


def _read_records(results: list[str], junit: list[str]) -> tuple[list[ResultRecord], list[str]]:
    """Every record of the files; a file that cannot be read is named in the problems, skipped.

    A results file that does not exist is an empty shard, not a problem: the runner writes none
    when no config was collected."""
    from cpci.schema import read_results
    from cpci.upload.errors import JUnitError
    from cpci.upload.junit import read_junit

    records: list[ResultRecord] = []
    problems: list[str] = []
    for path in results:
        if not Path(path).exists():
            why = "no config was collected or all were deselected"
            print(f"cpci upload: {path} does not exist ({why}?): an empty shard", file=sys.stderr)
            continue
        try:
            records += read_results(path)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    for path in junit:
        try:
            records += read_junit(path)
        except JUnitError as exc:
            problems.append(str(exc))
    for problem in problems:
        print(f"cpci upload: skipped {problem}", file=sys.stderr)
    return records, problems


def _print_notes(notes: list[str]) -> None:
    for line in notes:
        print(f"cpci upload: {line}", file=sys.stderr)


def _print_rejected(rejected: list[str]) -> None:
    for line in rejected:
        print(
            f"cpci upload: the service refused a spooled upload for good; {line}",
            file=sys.stderr,
        )
