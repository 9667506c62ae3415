"""How a maintainer's command (`cpci quarantine`, `cpci culprit`) reaches the service: the same
`--server` / `--token` as `cpci upload` (over CPCI_SERVER / CPCI_TOKEN, through
`cpci.upload.settings.UploadSettings`), the one `ServiceClient`, and one place that turns the
service's refusals into what to do next."""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used, so `cpci --help` stays fast
    from cpci.upload.errors import UploadFailed
    from cpci.upload.service_client import ServiceClient

REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")  # as cpci.schema.RunEnvelope.repository
MAKE_TOKEN = "`cpci token create OWNER/REPO --scope branch` on the service's host makes one"


class CommandError(Exception):
    """What the command could not do, said with the fix; `exit_code` 2: bad arguments or
    settings, 1: the service refused or could not be reached."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_service_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=None, help="service URL (or CPCI_SERVER)")
    parser.add_argument(
        "--token",
        default=None,
        help="an upload token of the repository (or CPCI_TOKEN); writes need scope branch",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def repository(value: str) -> str:
    """OWNER/REPO as the service names repositories."""
    if not REPOSITORY.fullmatch(value):
        raise CommandError(f"needs OWNER/REPO, got {value!r}", 2)
    return value


def service_client(args: argparse.Namespace) -> ServiceClient:
    """The client for `--server` with `--token` (flags over CPCI_SERVER / CPCI_TOKEN)."""
    from cpci.upload.service_client import ServiceClient
    from cpci.upload.settings import UploadSettings

    settings = UploadSettings.from_flags(server=args.server, token=args.token)
    if not settings.server:
        raise CommandError("--server (or CPCI_SERVER) is required: the cpci service's URL", 2)
    token = settings.token.get_secret_value() if settings.token else None
    return ServiceClient(settings.server, token)


def refused(exc: UploadFailed, doing: str, *, writes: bool) -> CommandError:
    """The service's refusal of `doing` with what to do about it."""
    # No answer: the message says to check the server URL. A read's 403 (an untrusted branch),
    # a 404 and a 409 say what to do in the service's own words.
    hint = ""
    if exc.status == 401:
        hint = f"give a token of this repository (--token or CPCI_TOKEN); {MAKE_TOKEN}"
    elif exc.status == 403 and writes:
        hint = f"this takes a token of scope branch for this repository; {MAKE_TOKEN}"
    return CommandError(f"{doing}: {exc}" + (f" ({hint})" if hint else ""))


def github_token(flag: str | None) -> str:
    """GitHub's token for a dispatch: the flag, else GITHUB_TOKEN (a workflow job's)."""
    token = flag or os.environ.get("GITHUB_TOKEN", "")
    if not token:
        raise CommandError(
            "--dispatch needs a GitHub token that may run workflows (actions: write): "
            "--github-token or GITHUB_TOKEN",
            2,
        )
    return token
