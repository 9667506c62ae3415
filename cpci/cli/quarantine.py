"""`cpci quarantine add|remove|list OWNER/REPO [CONFIG]`: a maintainer's quarantines.

A quarantined config still runs and is recorded and never gates a pull request; the service
releases it by itself once its trusted-branch results since the quarantine bound its failure
rate below CPCI_QUARANTINE_RELEASE_RATE (`cpci.evidence.release`), and `remove` ends it by hand.
Adding and removing take an upload token of scope branch, as writing the base history does.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cpci.cli.service_access import (
    CommandError,
    add_service_options,
    refused,
    repository,
    service_client,
)

if TYPE_CHECKING:
    from cpci.schema import QuarantineEntry, QuarantineList


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "quarantine",
        help="quarantine a config so it never gates, release it, list the quarantined ones",
        description="Example: cpci quarantine add my-org/my-repo 'tests/test_cp.py::test_ring@4' "
        "--reason 'flaky since the NCCL upgrade, #123' --server https://cpci.example.com "
        "(token of scope branch from CPCI_TOKEN). It still runs and is recorded; the service "
        "releases it once main's results show it passing again.",
    )
    parser.add_argument("action", choices=["add", "remove", "list"])
    parser.add_argument("repository", metavar="OWNER/REPO")
    parser.add_argument("config", nargs="?", help="the config id: NODEID@WORLD_SIZE")
    parser.add_argument(
        "--reason", default=None, help="why (add: required; remove: a note, default 'fixed')"
    )
    parser.add_argument(
        "--released", action="store_true", help="list: the ended quarantines too, newest first"
    )
    add_service_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from cpci.upload.errors import UploadError, UploadFailed

    try:
        repo = repository(args.repository)
        if args.action == "list":
            client = service_client(args)
            try:
                listed = client.quarantines(repo, released=args.released)
            except UploadFailed as exc:
                raise refused(exc, f"listing {repo}'s quarantines", writes=False) from exc
            print(listed.model_dump_json(indent=2) if args.json else _listing(listed))
            return 0
        if not args.config:
            raise CommandError(f"cpci quarantine {args.action} needs OWNER/REPO CONFIG", 2)
        if args.action == "add" and not args.reason:
            raise CommandError(
                "cpci quarantine add needs --reason: why it is quarantined (an issue link), "
                "shown beside it on every page and comment",
                2,
            )
        client = service_client(args)
        try:
            if args.action == "add":
                entry = client.quarantine(repo, args.config, args.reason)
            else:
                entry = client.release_quarantine(repo, args.config, args.reason or "fixed")
        except UploadFailed as exc:
            doing = "quarantining" if args.action == "add" else "releasing"
            raise refused(exc, f"{doing} {args.config} in {repo}", writes=True) from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"cpci quarantine: {problems}", file=sys.stderr)
        return 2
    except CommandError as exc:
        print(f"cpci quarantine: {exc}", file=sys.stderr)
        return exc.exit_code
    except UploadError as exc:  # a bad --server / --token setting
        print(f"cpci quarantine: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(entry.model_dump_json(indent=2))
    elif args.action == "add":
        print(
            f"quarantined {entry.config} by {entry.by}: it still runs and is recorded, and "
            f"never gates; {_release_text(entry)}"
        )
    else:
        print(f"released {entry.config} (quarantined since {entry.since:%Y-%m-%d %H:%M} UTC)")
    return 0


def _release_text(entry: QuarantineEntry) -> str:
    if entry.passes_to_release == 0:
        return "it is due for release at the next trusted run"
    return f"{entry.passes_to_release} straight passes on the trusted branch release it"


def _listing(listed: QuarantineList) -> str:
    """One line per quarantine: the config, who, since when, why, its evidence and release."""
    if not listed.quarantines:
        return f"no quarantined config in {listed.repository}"
    head = (
        f"{listed.repository}: released once its {listed.branch} results bound the failure "
        f"rate below {listed.release_rate:g} at the {listed.level:.0%} level"
    )
    lines = [head]
    for q in listed.quarantines:
        record = f"{q.evidence.failures}/{q.evidence.trials} failed since"
        state = (
            f"released {q.released_at:%Y-%m-%d} by {q.released_by}"
            if q.released_at
            else _release_text(q)
        )
        lines.append(
            f"{q.config}\tby {q.by} since {q.since:%Y-%m-%d %H:%M} UTC\t{q.reason}\t"
            f"{record}\t{state}"
        )
    return "\n".join(lines)
