"""A change's files from a local git checkout, as GitHub would list them for a PR.

`git diff base...head` compares head with the merge base, as a pull request's "Files changed"
does, and `-M` reports renames with both names.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cpci.github.models import ChangedFile

_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "C": "copied"}


class GitError(RuntimeError):
    """git failed; the message holds its stderr and what to check."""


def changed_files(base: str, head: str, repo: str | Path = ".") -> list[ChangedFile]:
    """The files changed between the merge base of `base` and `head`, and `head`."""
    done = _git(repo, "diff", "--name-status", "-M", "-z", f"{base}...{head}")
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()
        raise GitError(
            f"`git diff --name-status -M {base}...{head}` failed: {stderr}. Both refs must "
            "exist in the checkout: with actions/checkout, set `fetch-depth: 0` (a shallow "
            "clone has no merge base)"
        )
    return parse_name_status(done.stdout.decode())


def file_at(ref: str, path: str, repo: str | Path = ".") -> str | None:
    """A file's text at `ref` (e.g. the rules at the PR's base), None where it does not exist."""
    data = blob_at(ref, path, repo)
    return data.decode("utf-8", errors="replace") if data is not None else None


def blob_at(ref: str, path: str, repo: str | Path = ".") -> bytes | None:
    """A file's bytes at `ref`, None where it does not exist (the ref must)."""
    done = _git(repo, "show", f"{ref}:{path}")
    if done.returncode == 0:
        return done.stdout
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0:
        return None  # the ref exists, the file does not
    raise GitError(
        f"`git show {ref}:{path}` failed: {done.stderr.decode(errors='replace').strip()}. The "
        "ref must exist in the checkout: with actions/checkout, set `fetch-depth: 0`"
    )


def merge_base(base: str, head: str, repo: str | Path = ".") -> str:
    """The commit `git diff base...head` compares head with: what the PR's base is."""
    done = _git(repo, "merge-base", base, head)
    if done.returncode != 0:
        raise GitError(
            f"`git merge-base {base} {head}` failed: "
            f"{done.stderr.decode(errors='replace').strip() or 'no common commit'}. Both refs "
            "must exist in the checkout: with actions/checkout, set `fetch-depth: 0`"
        )
    return done.stdout.decode().strip()


def _git(repo: str | Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc


def parse_name_status(output: str) -> list[ChangedFile]:
    """Parse `git diff --name-status -z`: STATUS NUL PATH [NUL NEW_PATH] for each file."""
    fields = output.split("\0")
    files, i = [], 0
    while i < len(fields) and fields[i]:
        code = fields[i][0]
        if code in "RC":
            files.append(
                ChangedFile(
                    filename=fields[i + 2], status=_STATUS[code], previous_filename=fields[i + 1]
                )
            )
            i += 3
        else:
            files.append(ChangedFile(filename=fields[i + 1], status=_STATUS.get(code, "changed")))
            i += 2
    return files
