"""The few fields of GitHub's objects that the bot reads, parsed from REST responses.

Only what is used is kept, so a field GitHub adds or deprecates elsewhere changes nothing here.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


def _login(user: Any) -> str | None:
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else None


class Comment(_Model):
    id: int
    body: str
    user_login: str | None
    html_url: str

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Comment:
        return cls(
            id=data["id"],
            body=data.get("body") or "",
            user_login=_login(data.get("user")),
            html_url=data["html_url"],
        )


class PullRequest(_Model):
    number: int
    state: str
    title: str = ""
    body: str
    author: str | None = None
    labels: tuple[str, ...]
    head_sha: str
    head_ref: str
    head_repo: str | None
    base_sha: str
    base_ref: str
    base_repo: str
    html_url: str

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.base_repo

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> PullRequest:
        head_repo = data["head"].get("repo")
        return cls(
            number=data["number"],
            state=data["state"],
            title=data.get("title") or "",
            body=data.get("body") or "",
            author=_login(data.get("user")),
            labels=tuple(str(label["name"]) for label in data.get("labels") or ()),
            head_sha=data["head"]["sha"],
            head_ref=data["head"]["ref"],
            head_repo=head_repo["full_name"] if head_repo else None,
            base_sha=data["base"]["sha"],
            base_ref=data["base"]["ref"],
            base_repo=data["base"]["repo"]["full_name"],
            html_url=data["html_url"],
        )


#: The permission levels (GitHub's `permission`, from repos/get-collaborator-permission-level)
#: whose holders may write to the repository, and so may acknowledge a rule. `maintain` reads as
#: `write` there and `triage` as `read`: adding a label needs only triage, and the
#: `author_association` MEMBER says nothing about this repository.
WRITE_PERMISSIONS = frozenset({"admin", "write"})


class Review(_Model):
    """A PR review: only its state, text and who wrote it."""

    id: int
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
    body: str
    user_login: str | None

    def approves(self, pull_author: str | None) -> bool:
        """An approval by someone other than the PR's author (whether they may write to the
        repository is asked of GitHub: see `cpci.github.acks`)."""
        return (
            self.state == "APPROVED"
            and self.user_login is not None
            and self.user_login != pull_author
        )

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Review:
        return cls(
            id=data["id"],
            state=data["state"],
            body=data.get("body") or "",
            user_login=_login(data.get("user")),
        )


class IssueEvent(_Model):
    """One event of an issue's (or PR's) history; only what a `labeled` one says is kept."""

    event: str
    actor_login: str | None
    label: str | None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> IssueEvent:
        label = data.get("label")
        return cls(
            event=data["event"],
            actor_login=_login(data.get("actor")),
            label=str(label["name"]) if isinstance(label, dict) and "name" in label else None,
        )


class ChangedFile(_Model):
    """One file of a PR's diff; a rename keeps its old name too. `patch` is the PR's diff of
    it against the merge base, as hunks (GitHub leaves it out of large or binary diffs)."""

    filename: str
    status: str
    previous_filename: str | None = None
    patch: str | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ChangedFile:
        return cls(
            filename=data["filename"],
            status=data["status"],
            previous_filename=data.get("previous_filename"),
            patch=data.get("patch"),
        )


class RepoFile(_Model):
    """A file at a commit (repos/get-content): its size in bytes, and its text unless it was
    over the reader's bound (`text` None; GitHub itself sends no content past 1 MB)."""

    path: str
    size: int
    text: str | None

    @classmethod
    def from_api(cls, data: dict[str, Any], max_bytes: int) -> RepoFile | None:
        """None for what is not a file (a directory, a submodule, a symlink outside)."""
        if data.get("type") != "file":
            return None
        size = int(data["size"])
        text = None
        if size <= max_bytes and data.get("encoding") == "base64":
            text = base64.b64decode(data["content"]).decode("utf-8", errors="replace")
        return cls(path=data["path"], size=size, text=text)


class CheckRun(_Model):
    id: int
    status: str
    conclusion: str | None
    html_url: str | None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> CheckRun:
        return cls(
            id=data["id"],
            status=data["status"],
            conclusion=data.get("conclusion"),
            html_url=data.get("html_url"),
        )
