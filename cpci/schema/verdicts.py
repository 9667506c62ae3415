"""The PR verdicts in one table: name, label, icon, order and whether each gates the merge.

The report model, the PR comment, the check run and the web UI all read this table, so a verdict
is named, ordered and gated the same way everywhere (the dashboard once counted "3 failing" where
the report said 2 new failures and 1 flaky). It depends on nothing of cpci.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

Verdict = Literal[
    "new_failure",
    "flaky_on_arrival",
    "pending",
    "no_baseline",
    "infra",
    "flaky",
    "broken_at_base",
    "fixed",
    "passed",
    "skipped",
    "quarantined",
]


@dataclass(frozen=True)
class VerdictInfo:
    """How one verdict is shown and what it means for the merge.

    `failing`: the config fails at head (what `fail-on: any-failure` gates on);
    `gates`: the PR itself is to blame (what the default `fail-on: new-failures` gates on);
    `attention`: a reader must look at it (it gets a section in the comment and the report).
    A quarantined config is neither failing nor gating whatever it did at head: a maintainer
    took it out of every gate while it is fixed; its section still shows what it did."""

    name: Verdict
    title: str
    icon: str
    field: str  # the PR report's list holding this section ("" where it keeps none)
    failing: bool
    gates: bool
    attention: bool

    @property
    def label(self) -> str:
        """The verdict as a reader says it: "new failure", "broken at base"."""
        return self.name.replace("_", " ")

    @property
    def heading(self) -> str:
        return f"{self.icon} {self.title}"


#: In the order a reader acts on them: what this PR broke first.
VERDICTS: tuple[VerdictInfo, ...] = (
    VerdictInfo("new_failure", "New failures", "❌", "new_failures", True, True, True),
    VerdictInfo("flaky_on_arrival", "Flaky on arrival", "🐣", "flaky_on_arrival", True, True, True),
    VerdictInfo("pending", "Pending", "⏳", "pending", False, False, True),
    VerdictInfo("no_baseline", "No baseline", "❔", "no_baseline", True, False, True),
    VerdictInfo("infra", "Infra", "🛠️", "infra", True, False, True),
    VerdictInfo("flaky", "Flaky", "🎲", "flaky", True, False, True),
    VerdictInfo("broken_at_base", "Broken at base", "🧱", "broken_at_base", True, False, True),
    VerdictInfo("fixed", "Fixed", "✅", "fixed", False, False, True),
    VerdictInfo("quarantined", "Quarantined", "🔒", "quarantined", False, False, True),
    VerdictInfo("passed", "Passed", "✔️", "", False, False, False),
    VerdictInfo("skipped", "Skipped", "⏭️", "", False, False, False),
)
BY_NAME: Mapping[str, VerdictInfo] = {v.name: v for v in VERDICTS}
#: The verdicts a reader must look at, in the order a comment shows them.
ATTENTION: tuple[Verdict, ...] = tuple(v.name for v in VERDICTS if v.attention)
#: Verdicts of configs failing at head.
FAILING: frozenset[str] = frozenset(v.name for v in VERDICTS if v.failing)
#: Verdicts that gate the merge under the default `fail-on: new-failures`.
GATING: frozenset[str] = frozenset(v.name for v in VERDICTS if v.gates)

QuickVerdict = Literal["pending", "passing", "failing", "new_failures"]


def info(name: str) -> VerdictInfo:
    """The table's row for `name`; an unknown name is a bug, so it raises."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise ValueError(f"unknown verdict {name!r}; the verdicts are {known}") from None


def quick_verdict(by_verdict: Mapping[str, int], pending: bool) -> QuickVerdict:
    """A PR in one word, from its report's per-verdict counts (the dashboard's list of PRs):
    pending until every shard is in, `new_failures` when a gating verdict is present,
    `failing` when configs fail for reasons not the PR's, else `passing`."""
    if pending:
        return "pending"
    if any(by_verdict.get(name, 0) for name in GATING):
        return "new_failures"
    if any(by_verdict.get(name, 0) for name in FAILING):
        return "failing"
    return "passing"


def count_text(by_verdict: Mapping[str, int], which: Collection[str] = FAILING) -> str:
    """ "2 new failure(s), 1 flaky": the counts of the verdicts in `which` (by default the
    failing ones; `GATING` for what the gate fails on), in the table's order."""
    parts = [
        f"{by_verdict[v.name]} {v.label}{'(s)' if v.name == 'new_failure' else ''}"
        for v in VERDICTS
        if v.name in which and by_verdict.get(v.name)
    ]
    return ", ".join(parts)
