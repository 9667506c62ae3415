"""Evaluate file-consistency rules against a change: which declared groups changed only in part.

The same evaluation serves the service (files from GitHub's PR file list) and `cpci consistency`
(files from `git diff` on a checkout). A renamed file counts under its old and its new name, so
moving one file of a pair is noticed. An acknowledgement turns a finding into a note that neither
warns nor fails: the label `cpci-ack:RULE`, or a `cpci-ack: RULE` line in an approving review,
acknowledges any rule when it comes from someone who may write to the repository (which labels
and reviews count is `cpci.github.acks`' to say), while a line `cpci-ack: RULE` in the PR body
(which the author writes) acknowledges only `severity: warn` rules: an author cannot waive a
`fail` rule. An acknowledgement that did not count is said in the finding, with why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from cpci.github.models import ChangedFile
from cpci.github.rules import Rule

ACK_LABEL_PREFIX = "cpci-ack:"
_ACK_LINE = re.compile(r"^[ \t]*cpci-ack:[ \t]*(\S+)[ \t]*$", re.MULTILINE)
Level = Literal["fail", "warn", "note"]


class Finding(BaseModel):
    """One rule whose paths changed only in part."""

    rule: str
    level: Level
    severity: Literal["warn", "fail"]
    message: str
    changed: list[str]  # the rule's paths/globs that matched a changed file
    unchanged: list[str]  # those that did not
    files: list[str]  # the changed files that matched
    acknowledged: bool


class ConsistencyResult(BaseModel):
    rules: int
    files: int
    findings: list[Finding]
    error: str | None = None  # the rules file could not be read; shown, never fails the gate

    @property
    def failed(self) -> bool:
        return any(f.level == "fail" for f in self.findings)

    @property
    def warned(self) -> bool:
        return any(f.level == "warn" for f in self.findings)


def changed_names(files: Iterable[ChangedFile]) -> set[str]:
    """Every path the change touched; a rename contributes both names."""
    names: set[str] = set()
    for f in files:
        names.add(f.filename)
        if f.previous_filename:
            names.add(f.previous_filename)
    return names


@dataclass(frozen=True)
class Acknowledgements:
    """Rule names acknowledged, by whom: `maintainer` (labels, `--ack`) waives any rule,
    `author` (body lines) only `warn` rules; `unvouched` says, per rule, why an ack of it by
    someone who may not write to the repository did not count."""

    maintainer: frozenset[str] = frozenset()
    author: frozenset[str] = frozenset()
    unvouched: Mapping[str, str] = field(default_factory=dict)

    def covers(self, rule: Rule) -> bool:
        return rule.name in self.maintainer or (
            rule.severity == "warn" and rule.name in self.author
        )

    def refused(self, rule: Rule) -> bool:
        """An author's ack of a `fail` rule, which does not count."""
        return rule.severity == "fail" and rule.name in self.author and not self.covers(rule)


def ack_label_rule(label: str) -> str | None:
    """The rule a `cpci-ack:RULE` label acknowledges (None: not an ack label)."""
    return label[len(ACK_LABEL_PREFIX) :].strip() if label.startswith(ACK_LABEL_PREFIX) else None


def acked_rules(text: str) -> set[str]:
    """The rules named by `cpci-ack: RULE` lines of a text (a PR body, a review)."""
    return set(_ACK_LINE.findall(text or ""))


def acknowledgements(
    labels: Iterable[str],
    body: str,
    approvals: Iterable[str] = (),
    unvouched: Mapping[str, str] | None = None,
) -> Acknowledgements:
    """Rule names acknowledged by a `cpci-ack:RULE` label or a `cpci-ack: RULE` line, in the PR
    body (the author's) or in the text of maintainers' approving reviews (`approvals`);
    `unvouched`: why other acks did not count, per rule."""
    acked = {rule for rule in map(ack_label_rule, labels) if rule is not None}
    for text in approvals:
        acked |= acked_rules(text)
    return Acknowledgements(frozenset(acked), frozenset(acked_rules(body)), dict(unvouched or {}))


def evaluate(
    rules: Sequence[Rule], files: Iterable[ChangedFile], acked: Acknowledgements | None = None
) -> ConsistencyResult:
    """The findings of `rules` on a change, in rule order."""
    names = sorted(changed_names(files))
    acks = acked or Acknowledgements()
    findings = []
    for rule in rules:
        hits = [[n for n in names if pattern.fullmatch(n)] for pattern in rule.patterns]
        if all(hits) or not any(hits):
            continue
        is_acked = acks.covers(rule)
        message = rule.message or f"these paths change together: {', '.join(rule.paths)}"
        if not is_acked and rule.name in acks.unvouched:
            message += f" ({acks.unvouched[rule.name]})"
        if acks.refused(rule):
            message += (
                f" (a `cpci-ack: {rule.name}` line in the PR description cannot waive a "
                f"`severity: fail` rule: a maintainer adds the label `cpci-ack:{rule.name}`)"
            )
        findings.append(
            Finding(
                rule=rule.name,
                level="note" if is_acked else rule.severity,
                severity=rule.severity,
                message=message,
                changed=[p for p, h in zip(rule.paths, hits, strict=True) if h],
                unchanged=[p for p, h in zip(rule.paths, hits, strict=True) if not h],
                files=sorted({n for h in hits for n in h}),
                acknowledged=is_acked,
            )
        )
    return ConsistencyResult(rules=len(rules), files=len(names), findings=findings)
