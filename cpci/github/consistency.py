"""Evaluate file-consistency rules against a change: which declared groups changed only in part,
and, for a pair of Python files, which functions drifted from their twin.

The same evaluation serves the service (files from GitHub's PR file list, read through the
contents API) and `cpci consistency` (files from `git diff` on a checkout, read with git). A
renamed file counts under its old and its new name, so moving one file of a pair is noticed.

A rule of function granularity (`cpci.github.drift`) warns only about functions the change
edited on one side while their twin on the other was still alike and did not change alike; a
change that edits only code of one side, or code whose twin had diverged, is a note. Where its
files cannot be read (absent, over the bound, not Python) it is checked file by file and says
why. A PR marked as a fix (`cpci.github.rules.FixMarkers`) that leaves a twin behind raises the
rule's severity one step: its drifts fail.

An acknowledgement turns a finding (or one function's drift) into a note that neither warns nor
fails: the label `cpci-ack:RULE`, or a `cpci-ack: RULE` line in an approving review,
acknowledges any rule when it comes from someone who may write to the repository (which labels
and reviews count is `cpci.github.acks`' to say), while a line `cpci-ack: RULE` in the PR body
(which the author writes) acknowledges only what warns: an author cannot waive a `fail`. Written
`RULE:FUNCTION`, each acknowledges one function (its qualified or plain name, on either side).
An acknowledgement that did not count is said in the finding, with why.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from cpci.github.drift import DriftError, FunctionDrift, Level, PairDrift, pair_drift
from cpci.github.models import ChangedFile
from cpci.github.pair_files import PairReader, read_pair
from cpci.github.rules import Rule, RuleSet, Severity

ACK_LABEL_PREFIX = "cpci-ack:"
_ACK_LINE = re.compile(r"^[ \t]*cpci-ack:[ \t]*(\S+)[ \t]*$", re.MULTILINE)
_LEVELS: dict[str, int] = {"note": 0, "warn": 1, "fail": 2}


class Finding(BaseModel):
    """One rule the change broke: its paths changed only in part (file level), or functions it
    edited while their twins, still alike, did not change alike (function level: `drifts`)."""

    rule: str
    level: Level
    severity: Severity  # the rule's own
    message: str
    changed: list[str]  # the rule's paths/globs that matched a changed file
    unchanged: list[str]  # those that did not
    files: list[str]  # the changed files that matched
    acknowledged: bool
    granularity: Literal["file", "function"] = "file"
    file_level_because: str = ""  # a function-level rule checked file by file: why
    drifts: list[FunctionDrift] = []
    one_sided: list[str] = []  # functions changed that have no twin: no warning
    diverged: list[str] = []  # functions changed whose twin was no longer alike: no warning
    raised_by: str = ""  # why the PR is a fix, where that raised the drifts to fail

    def tally(self) -> list[str]:
        """The function-level count, as plain phrases: what drifted (each is told below it),
        and, in one phrase, the changed functions that do not warn."""
        acked = sum(d.acknowledged for d in self.drifts)
        to_port = f"{len(self.drifts) - acked} function(s) to port"
        told = [to_port if self.drifts else "no function to port"]
        told += [f"{acked} acknowledged"] if acked else []
        quiet = [f"{len(self.one_sided)} on one side only"] if self.one_sided else []
        quiet += [f"{len(self.diverged)} whose twin had diverged"] if self.diverged else []
        if quiet:
            told.append(f"changed functions not warned about: {', '.join(quiet)}")
        if self.raised_by:
            told.append(f"raised to fail: this PR is a fix ({self.raised_by})")
        return told


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
    """What was acknowledged (rule names, or `RULE:FUNCTION`), by whom: `maintainer` (labels,
    writers' approving reviews, `--ack`) waives anything, `author` (body lines) only what
    warns; `unvouched` says, per name, why an ack of it by someone who may not write to the
    repository did not count."""

    maintainer: frozenset[str] = frozenset()
    author: frozenset[str] = frozenset()
    unvouched: Mapping[str, str] = field(default_factory=dict)

    def covers(self, names: Collection[str], severity: Severity) -> bool:
        """Whether an ack of any of `names` waives something of this severity."""
        return not self.maintainer.isdisjoint(names) or (
            severity == "warn" and not self.author.isdisjoint(names)
        )

    def notes(self, names: Collection[str], severity: Severity, what: str) -> str:
        """Why acks of `names` did not count, as parenthesised text to append to `what`'s
        message: unvouched labels and reviews, and an author's ack of a `fail`."""
        parts = [self.unvouched[n] for n in names if n in self.unvouched]
        refused = [n for n in names if n in self.author]
        if severity == "fail" and refused and not self.covers(names, severity):
            parts.append(
                f"a `cpci-ack: {refused[0]}` line in the PR description cannot waive {what}: "
                f"a maintainer adds the label `cpci-ack:{refused[0]}`"
            )
        return "".join(f" ({part})" for part in parts)


def ack_label_rule(label: str) -> str | None:
    """What a `cpci-ack:RULE` (or `cpci-ack:RULE:FUNCTION`) label acknowledges (None: not an
    ack label)."""
    return label[len(ACK_LABEL_PREFIX) :].strip() if label.startswith(ACK_LABEL_PREFIX) else None


def acked_rules(text: str) -> set[str]:
    """What `cpci-ack: RULE` (or `RULE:FUNCTION`) lines of a text name (a PR body, a review)."""
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
    rules: RuleSet,
    files: Iterable[ChangedFile],
    acked: Acknowledgements | None = None,
    *,
    reader: PairReader | None = None,
    title: str = "",
    labels: Iterable[str] = (),
) -> ConsistencyResult:
    """The findings of `rules` on a change, in rule order. With a `reader`, rules of function
    granularity are read and checked function by function (without one, file by file);
    `title` and `labels` say whether the change is a fix."""
    changes = list(files)
    names = sorted(changed_names(changes))
    acks = acked or Acknowledgements()
    fix = rules.fixes.reason(title, labels)
    findings = []
    for rule in rules.rules:
        hits = [[n for n in names if pattern.fullmatch(n)] for pattern in rule.patterns]
        if not any(hits):
            continue
        because = ""
        if rule.by_function and reader is not None:
            drift = _drift_of(rule, changes, reader)
            if not isinstance(drift, str):
                finding = _function_finding(rule, hits, drift, acks, fix)
                findings += [finding] if finding is not None else []
                continue
            because = drift
        if not all(hits):
            findings.append(_file_finding(rule, hits, acks, because))
    return ConsistencyResult(rules=len(rules.rules), files=len(names), findings=findings)


def _drift_of(rule: Rule, changes: list[ChangedFile], reader: PairReader) -> PairDrift | str:
    """The pair's drift, or why it is checked file by file instead."""
    pair = read_pair(rule.paths, changes, reader)
    if isinstance(pair, str):
        return pair
    try:
        return pair_drift(*pair, threshold=rule.similarity, link=reader.link)
    except DriftError as exc:
        return str(exc)


def _scope(rule: Rule, hits: list[list[str]]) -> tuple[list[str], list[str], list[str]]:
    """The rule's paths that matched a changed file, those that did not, and those files."""
    changed = [p for p, h in zip(rule.paths, hits, strict=True) if h]
    unchanged = [p for p, h in zip(rule.paths, hits, strict=True) if not h]
    return changed, unchanged, sorted({n for h in hits for n in h})


def _message(rule: Rule) -> str:
    return rule.message or f"these paths change together: {', '.join(rule.paths)}"


def _file_finding(
    rule: Rule, hits: list[list[str]], acks: Acknowledgements, because: str
) -> Finding:
    is_acked = acks.covers([rule.name], rule.severity)
    changed, unchanged, files = _scope(rule, hits)
    message = _message(rule)
    if not is_acked:
        message += acks.notes([rule.name], rule.severity, "a `severity: fail` rule")
    return Finding(
        rule=rule.name,
        level="note" if is_acked else rule.severity,
        severity=rule.severity,
        message=message,
        changed=changed,
        unchanged=unchanged,
        files=files,
        acknowledged=is_acked,
        file_level_because=because,
    )


def _function_finding(
    rule: Rule, hits: list[list[str]], found: PairDrift, acks: Acknowledgements, fix: str
) -> Finding | None:
    """The drifts, each acknowledged or not; a note where nothing drifted but the pair changed
    in part (so the reader sees why there is no warning); None where the pair changed in
    step."""
    if not found.drifts and all(hits):
        return None
    severity: Severity = "fail" if fix and found.drifts else rule.severity
    whole = acks.covers([rule.name], severity)
    drifts = []
    for drift in found.drifts:
        names = [f"{rule.name}:{name}" for name in drift.names]
        acked = whole or acks.covers(names, severity)
        note = "" if acked else acks.notes(names, severity, "a `fail` warning").strip()
        level: Level = "note" if acked else severity
        drifts.append(
            drift.model_copy(update={"level": level, "acknowledged": acked, "note": note})
        )
    changed, unchanged, files = _scope(rule, hits)
    message = _message(rule)
    if drifts and not whole:
        what = "a `severity: fail` rule" if rule.severity == "fail" else "what a fix raised to fail"
        message += acks.notes([rule.name], severity, what)
    return Finding(
        rule=rule.name,
        level=max((d.level for d in drifts), key=_LEVELS.__getitem__, default="note"),
        severity=rule.severity,
        message=message,
        changed=changed,
        unchanged=unchanged,
        files=files,
        acknowledged=whole or (bool(drifts) and all(d.acknowledged for d in drifts)),
        granularity="function",
        drifts=drifts,
        one_sided=found.one_sided,
        diverged=found.diverged,
        raised_by=fix if severity != rule.severity else "",
    )
