"""Reading the files of a rule's pair at the change's base and head, for function-level drift.

Two readers serve the one check: the bot's reads GitHub's contents API (repos/get-content) at
the PR's head and, where it must, its base commit, with no checkout; `cpci consistency`'s reads
a local checkout with git, at the merge base and the head. Each is bounded: a file over
`max_bytes` is not read, and the rule is then checked file by file, saying why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from cpci.github.client import GitHubClient
from cpci.github.definitions import split_lines
from cpci.github.drift import PairVersion, Side
from cpci.github.gitdiff import blob_at, merge_base
from cpci.github.models import ChangedFile, PullRequest
from cpci.github.patches import unapply

#: The default bound on each file read: GitHub's contents API sends content up to 1 MB.
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class PairFile:
    """One file at one side: its text, or why there is none (absent, over the bound)."""

    text: str | None
    problem: str = ""


class PairReader(Protocol):
    """Where the check reads a pair's files, and how it links to a function's lines."""

    def read(self, path: str, side: Side) -> PairFile: ...

    def link(self, path: str, side: Side, start: int, end: int) -> str | None: ...


def _too_large(path: str, side: Side, size: int, bound: int) -> PairFile:
    return PairFile(None, f"`{path}` is {size:,} bytes at {side}, over the {bound:,}-byte bound")


@dataclass
class GitHubPairReader:
    """The PR's files through GitHub's contents API, at `pull`'s base and head commits."""

    client: GitHubClient
    repo: str
    pull: PullRequest
    max_bytes: int = MAX_FILE_BYTES

    def _sha(self, side: Side) -> str:
        return self.pull.base_sha if side == "base" else self.pull.head_sha

    def read(self, path: str, side: Side) -> PairFile:
        sha = self._sha(side)
        found = self.client.get_file(self.repo, path, sha, max_bytes=self.max_bytes)
        if found is None:
            return PairFile(None, f"`{path}` does not exist at {side} ({sha[:12]})")
        if found.text is not None:
            return PairFile(found.text)
        if found.size > self.max_bytes:
            return _too_large(path, side, found.size, self.max_bytes)
        return PairFile(None, f"GitHub sends no content for `{path}` ({found.size:,} bytes)")

    def link(self, path: str, side: Side, start: int, end: int) -> str | None:
        """The lines on GitHub at that side's commit (the PR's page names the repository)."""
        web = self.pull.html_url.rsplit("/pull/", 1)[0]
        return f"{web}/blob/{self._sha(side)}/{quote(path)}#L{start}-L{end}"


@dataclass
class GitPairReader:
    """A local checkout's files at the merge base of `base` and `head` (what `git diff
    base...head` compares), and at `head`."""

    repo: str | Path
    base: str
    head: str
    max_bytes: int = MAX_FILE_BYTES

    @cached_property
    def _base_commit(self) -> str:
        return merge_base(self.base, self.head, self.repo)

    def read(self, path: str, side: Side) -> PairFile:
        ref = self._base_commit if side == "base" else self.head
        data = blob_at(ref, path, self.repo)
        if data is None:
            return PairFile(None, f"`{path}` does not exist at {side} ({ref[:12]})")
        if len(data) > self.max_bytes:
            return _too_large(path, side, len(data), self.max_bytes)
        return PairFile(data.decode("utf-8", errors="replace"))

    def link(self, path: str, side: Side, start: int, end: int) -> str | None:
        return None  # a local checkout has no page to link to: the output names path:line


def read_pair(
    paths: tuple[str, ...], files: Iterable[ChangedFile], reader: PairReader
) -> tuple[PairVersion, PairVersion] | str:
    """The pair's two files at the base and the head of the change, or why they cannot be
    compared function by function (a file added or removed, absent, over the bound). A file
    the change renamed is read under its old name at the base and its new one at the head; a
    file it did not touch is read once, at the head, which is what the base holds too.

    A changed file's base is its head with the change's own `patch` undone, where the file
    list carries one: GitHub's diff against the merge base, whereas a PR's `base.sha` is the
    base branch's tip when the PR was opened (or later), which may hold other work on the
    file. Without a patch (a large diff, a local checkout) the base side is read."""
    by_name: dict[str, ChangedFile] = {}
    for f in files:
        by_name[f.filename] = f
        if f.previous_filename:
            by_name[f.previous_filename] = f
    versions = []
    for path in paths:
        entry = by_name.get(path)
        if entry is not None and entry.status in ("added", "removed"):
            return f"`{path}` was {entry.status} by this change"
        base_path = (entry.previous_filename if entry else None) or path
        head_path = entry.filename if entry else path
        head = reader.read(head_path, "head")
        base = head if entry is None else _base(entry, head) or reader.read(base_path, "base")
        for got in (base, head):
            if got.text is None:
                return got.problem
        assert base.text is not None
        assert head.text is not None
        versions.append(PairVersion(base_path, head_path, base.text, head.text))
    first, second = versions
    return first, second


def _base(entry: ChangedFile, head: PairFile) -> PairFile | None:
    """The file before the change: its head with the change's patch undone (None: no patch,
    or one that does not fit the head)."""
    if entry.patch is None or head.text is None:
        return None
    old = unapply(split_lines(head.text), entry.patch)
    return PairFile("".join(old)) if old is not None else None
