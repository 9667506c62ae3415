"""A repository's first-parent history, as the uploader sends it and the service records it.

The base-branch comparison needs each commit's first parent; `cpci upload` sends the checkout's
`git log --first-parent` (`Ancestry`) and the service answers how many links it holds
(`AncestryReceipt`). One definition, so the client builds and reads exactly what the route takes.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from cpci.schema.fields import CommitSha, Identity

#: Links per request: a long history is sent in several.
MAX_PARENT_LINKS = 10_000


class ParentLink(BaseModel):
    """`parent` is `commit`'s first parent."""

    commit: CommitSha
    parent: CommitSha


class Ancestry(BaseModel):
    """First-parent links, e.g. from `git log --first-parent --format='%H %P'`, of `branch`:
    the service takes ancestry from trusted branches only, so it must know whose history this
    is (an OIDC token says it by its ref; an upload token's request must say it here)."""

    parents: list[ParentLink] = Field(max_length=MAX_PARENT_LINKS)
    branch: Identity | None = Field(
        default=None, max_length=255, description="the branch whose history the links are"
    )


class AncestryReceipt(BaseModel):
    """How many of the links sent the service now holds (a link sent again counts)."""

    recorded: int
