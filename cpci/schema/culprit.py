"""Which commit broke a config on a trusted branch: the range along the first-parent chain.

When a config turns from passing to failing on a trusted branch and the chance test says a flake
would not fail like that, the service names the last commit it passed on (`last_good`), the
first it failed on (`first_bad`) and the commits between that never ran it (`untested`, oldest
first). The culprit is `first_bad` or one of `untested`; with none untested it is `first_bad`.
The bisection driver (`cpci culprit`) reads this record and runs the config at `midpoint()`
until one suspect is left; each of those runs uploads and the range narrows by itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from cpci.schema.flakiness import FlakeTest

CULPRIT_SCHEMA = "cpci.culprit/1"
#: `broken`: named (the chance test rejects a flake); `undecided`: failing, but a flake could
#: still explain it; `passing`: its newest run on the chain passed; `no-results`: it never ran
#: on the chain read.
CulpritStatus = Literal["broken", "undecided", "passing", "no-results"]


class CulpritRange(BaseModel):
    """One config's break on a trusted branch (`GET /api/v1/repos/OWNER/REPO/culprit`)."""

    schema_: Literal["cpci.culprit/1"] = Field(default="cpci.culprit/1", alias="schema")
    repository: str
    branch: str
    config: str
    status: CulpritStatus
    reason: str
    tip: str | None = Field(description="the newest commit of the chain read")
    last_good: str | None = Field(
        description="the newest commit before the failures that it passed on; None: it failed "
        "as far back as the chain read goes"
    )
    first_bad: str | None = Field(description="the oldest commit of the failing stretch")
    untested: list[str] = Field(
        default_factory=list,
        description="commits between last_good and first_bad that never ran it, oldest first",
    )
    chance: FlakeTest | None = None

    @property
    def suspects(self) -> list[str]:
        """The commits that may have broken it, oldest first: the untested ones, then
        `first_bad` (known bad)."""
        return [*self.untested, self.first_bad] if self.first_bad else []

    @property
    def culprit(self) -> str | None:
        """The commit that broke it, once one suspect is left (and a commit passed before it)."""
        if self.status != "broken" or self.last_good is None or len(self.suspects) != 1:
            return None
        return self.suspects[0]

    def midpoint(self) -> str | None:
        """The commit to run next: the middle untested one (a pass there moves `last_good` up,
        a failure moves `first_bad` down, halving the suspects); None when there is nothing to
        bisect (no break named, or one suspect left)."""
        if self.status != "broken" or self.last_good is None or not self.untested:
            return None
        return self.untested[(len(self.suspects) - 1) // 2]
