"""Commit ancestry, recorded by the uploader itself: the first-parent history of the checkout.

A PR whose base commit was never tested is compared with the nearest tested ancestor, which the
service can find only if it knows the base branch's first-parent links. Branch runs send them
(`git log --first-parent`, bounded) right after their upload, so nobody has to call
`POST /commits` by hand. Ancestry is a help, never a condition: without git, outside a
repository, or with the commit not checked out, it is skipped with a note and the upload stands.
PR runs do not send it (the service takes ancestry from branch rights only).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from cpci.schema import RunEnvelope
from cpci.upload.errors import UploadFailed
from cpci.upload.service_client import ServiceClient

#: Links sent per branch upload: enough to bridge a run of untested commits, small to send.
DEPTH = 50


@dataclass(frozen=True)
class GitAncestry:
    """First-parent links (commit, parent), nearest first; `note` says why there are none."""

    links: tuple[tuple[str, str], ...]
    note: str = ""


def first_parent_links(commit: str, *, cwd: Path, depth: int = DEPTH) -> GitAncestry:
    """Up to `depth` (commit, first parent) links from `commit` down, read from git in `cwd`."""
    try:
        done = subprocess.run(
            ["git", "log", "--first-parent", f"--max-count={depth}", "--format=%H %P", commit],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except FileNotFoundError:
        return GitAncestry((), "no git on PATH: commit ancestry not recorded")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GitAncestry((), f"git log failed ({exc}): commit ancestry not recorded")
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["git log failed"])[0]
        return GitAncestry((), f"{why}: commit ancestry not recorded")
    links = []
    for line in done.stdout.splitlines():
        shas = line.split()
        if len(shas) >= 2:
            links.append((shas[0], shas[1]))
    return GitAncestry(tuple(links))


def record_ancestry(
    server: str,
    token: str,
    envelope: RunEnvelope,
    *,
    cwd: Path,
    transport: httpx.BaseTransport | None = None,
) -> str:
    """Send the checkout's first-parent links for a branch run; returns a one-line note."""
    if envelope.pull_request is not None:
        return ""
    ancestry = first_parent_links(envelope.commit, cwd=cwd)
    if not ancestry.links:
        return ancestry.note
    client = ServiceClient(server, token, transport=transport)
    try:
        client.record_commits(envelope.repository, ancestry.links, branch=envelope.branch)
    except UploadFailed as exc:
        return f"commit ancestry not recorded: {exc}"
    return f"recorded {len(ancestry.links)} first-parent commit link(s)"
