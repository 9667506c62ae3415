"""Function-level drift in a pair of Python files: which functions a change made differ from a
twin in the other file that was still like them, and the patch that carries the change across.

For each function (or method) the change edited or removed in one file, its twin is the other
file's definition of the same qualified name (classes paired by name, else by the methods they
share: `WorkerImpl` and `WorkerV2Impl`), else the other file's most similar definition. It
drifted when the twin was at least `threshold` alike before the change, and the change did not
reach it: the twin stayed as it was, or changed otherwise (its own edit is not alike, and the
merge of this change into it is not already there). Functions that are new, whose twin does not
exist, or whose twin had already diverged before the change, are counted, never warned about.

A drift carries the change's hunk and, where the change merges cleanly into the twin (three-way,
on the function's lines: `cpci.github.patches`), a patch of the twin's file that `git apply`
takes at the head; where it does not, where the twin differs. A function the change removed gets
no patch: whether its twin can go too depends on the twin's callers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import cached_property
from typing import Literal

from pydantic import BaseModel

from cpci.github.definitions import Definition, definitions, similarity, split_lines
from cpci.github.patches import Merge, merge3, unified_diff

Side = Literal["base", "head"]
#: A link to lines of a file at the base or the head (None: nowhere to link, e.g. locally).
Linker = Callable[[str, Side, int, int], str | None]
Level = Literal["fail", "warn", "note"]
#: Classes are paired by their methods' names when at least this share is common.
CLASS_OVERLAP = 0.5
_TOKEN = re.compile(r"\w+|\S")


class FunctionRef(BaseModel):
    """A function at one side of the change: where it is, and a link to its lines."""

    path: str
    qualname: str
    start: int
    end: int
    url: str | None = None


class FunctionDrift(BaseModel):
    """A function the change edited (or removed) whose twin it did not carry the change to."""

    function: FunctionRef  # at the head (at the base, where the change removed it)
    twin: FunctionRef  # at the head
    change: Literal["modified", "removed"]
    twin_changed: bool  # the twin was edited too, but not alike
    similarity: float  # of the two, before the change
    hunk: str  # the change to `function`, as a diff of its lines
    patch: str | None  # the change carried to the twin: a diff of the twin's file
    patch_problem: str = ""  # where `patch` is None: why the change does not apply
    level: Level = "warn"
    acknowledged: bool = False
    note: str = ""  # why an acknowledgement of this function did not count

    @property
    def names(self) -> tuple[str, ...]:
        """The names an acknowledgement may use: either side's qualified or plain name."""
        refs = (self.function.qualname, self.twin.qualname)
        return tuple(dict.fromkeys([*refs, *(r.rpartition(".")[2] for r in refs)]))


class DriftError(ValueError):
    """A file of the pair is not Python: the rule is checked file by file, saying this."""


@dataclass(frozen=True)
class PairVersion:
    """One file of the pair: its path and text at the base and the head of the change."""

    base_path: str
    head_path: str
    base_text: str
    head_text: str

    @cached_property
    def base(self) -> list[Definition]:
        return _parse(self.base_text, self.base_path, "base")

    @cached_property
    def head(self) -> list[Definition]:
        return _parse(self.head_text, self.head_path, "head")

    @cached_property
    def head_lines(self) -> list[str]:
        return split_lines(self.head_text)


def _parse(text: str, path: str, side: str) -> list[Definition]:
    try:
        return definitions(text)
    except SyntaxError as exc:
        problem = f"`{path}` at {side} is not Python (line {exc.lineno}: {exc.msg})"
        raise DriftError(problem) from exc


@dataclass(frozen=True)
class Edit:
    """What the change did to one definition of a file: `base` None is new, `head` None gone."""

    base: Definition | None
    head: Definition | None

    @property
    def kind(self) -> Literal["added", "removed", "modified", "unchanged"]:
        if self.base is None:
            return "added"
        if self.head is None:
            return "removed"
        return "unchanged" if self.base.shape == self.head.shape else "modified"


@dataclass
class PairDrift:
    """The drifts of a pair, and the changed functions that do not warn, by name."""

    drifts: list[FunctionDrift] = field(default_factory=list)
    one_sided: list[str] = field(default_factory=list)  # no twin in the other file
    diverged: list[str] = field(default_factory=list)  # a twin that was no longer alike


def pair_drift(a: PairVersion, b: PairVersion, *, threshold: float, link: Linker) -> PairDrift:
    """The drifts between `a` and `b` (raises DriftError where either is not Python)."""
    found = PairDrift()
    edits = (_edits(a, threshold), _edits(b, threshold))
    seen: set[tuple[str, str]] = set()  # (a's name, b's name) of each pair judged
    for flip, (this, other) in enumerate(((a, b), (b, a))):
        names = _class_map(this.base, other.base)
        others = {d.qualname: d for d in other.base}
        taken = {_translate(d.qualname, names) for d in this.base}
        their_edits = {e.base.qualname: e for e in edits[1 - flip] if e.base is not None}
        there_at_head = {d.qualname for d in other.head}
        for edit in edits[flip]:
            if edit.kind == "unchanged":
                continue
            if edit.base is None:  # new: one side only, unless the other has it already
                assert edit.head is not None
                if _translate(edit.head.qualname, names) not in there_at_head:
                    found.one_sided.append(edit.head.qualname)
                continue
            mine = edit.base
            twin = others.get(_translate(mine.qualname, names)) or _most_similar(
                mine, [d for d in other.base if d.qualname not in taken], threshold
            )
            if twin is None:
                found.one_sided.append(mine.qualname)
                continue
            key = (twin.qualname, mine.qualname) if flip else (mine.qualname, twin.qualname)
            if key in seen:
                continue
            seen.add(key)
            alike = similarity(mine.shape, twin.shape, threshold)
            theirs = their_edits[twin.qualname]
            if theirs.head is None and edit.head is None:
                continue  # removed on both sides
            if alike < threshold or theirs.head is None:
                found.diverged.append(mine.qualname)
                continue
            drift = _drift(this, other, edit, theirs, alike, threshold, link)
            if drift is not None:
                found.drifts.append(drift)
    return found


def _edits(version: PairVersion, threshold: float) -> list[Edit]:
    """Each definition at the base with its head (same name, else renamed or moved: the most
    similar one left over), then the definitions new at the head."""
    heads = {d.qualname: d for d in version.head}
    paired = {d.qualname: heads.get(d.qualname) for d in version.base}
    left = [d for d in version.head if d.qualname not in paired]
    for d in version.base:
        if paired[d.qualname] is None:
            match = _most_similar(d, left, threshold)
            if match is not None:
                paired[d.qualname] = match
                left.remove(match)
    return [Edit(d, paired[d.qualname]) for d in version.base] + [Edit(None, d) for d in left]


def _most_similar(
    one: Definition, candidates: Sequence[Definition], threshold: float
) -> Definition | None:
    scored = [(similarity(one.shape, c.shape, threshold), c) for c in candidates]
    best = max(scored, key=lambda s: s[0], default=None)
    return best[1] if best is not None and best[0] >= threshold else None


def _class_map(mine: Sequence[Definition], theirs: Sequence[Definition]) -> dict[str, str]:
    """This file's top-level classes to the other's: the same name, else the class sharing the
    most method names (at least `CLASS_OVERLAP` of them), so `WorkerImpl.train` finds
    `WorkerV2Impl.train`."""

    def members(defs: Sequence[Definition]) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for d in defs:
            if d.owner:
                found.setdefault(d.owner.split(".")[0], set()).add(d.name)
        return found

    here, there = members(mine), members(theirs)
    mapping = {name: name for name in here if name in there}
    pairs = sorted(
        (
            (len(m & t) / len(m | t), name, other)
            for name, m in here.items()
            if name not in mapping
            for other, t in there.items()
            if other not in here
        ),
        reverse=True,
    )
    for overlap, name, other in pairs:
        if overlap >= CLASS_OVERLAP and name not in mapping and other not in mapping.values():
            mapping[name] = other
    return mapping


def _translate(qualname: str, classes: dict[str, str]) -> str:
    top, dot, rest = qualname.partition(".")
    return classes.get(top, top) + dot + rest if dot else qualname


def _drift(
    this: PairVersion,
    other: PairVersion,
    edit: Edit,
    theirs: Edit,
    alike: float,
    threshold: float,
    link: Linker,
) -> FunctionDrift | None:
    """The drift of `edit` against the twin's own edit, None where the change reached it."""
    mine, twin, after = edit.base, theirs.head, edit.head
    assert mine is not None
    assert twin is not None
    merge = _port(edit, twin)
    if merge.lines == twin.lines:
        return None  # the twin already holds the change
    if (
        theirs.base is not None
        and after is not None
        and theirs.kind == "modified"
        and similarity(_changes(mine, after), _changes(theirs.base, twin)) >= threshold
    ):
        return None  # edited alike on both sides
    path = this.head_path if after is not None else this.base_path
    hunk = unified_diff(
        mine.lines,
        after.lines if after is not None else (),
        path=path,
        old_start=mine.start,
        new_start=after.start if after is not None else mine.start,
    )
    patch, problem = None, ""
    if after is None:
        problem = (
            f"the change removes `{mine.qualname}`; `{twin.qualname}` stays: remove it too "
            "where nothing calls it, or acknowledge"
        )
    elif merge.lines is None:
        first, last = merge.conflicts[0][0], merge.conflicts[-1][1]
        span = f"{twin.start + first}" + (f"-{twin.start + last - 1}" if last - first > 1 else "")
        problem = (
            f"the change does not apply cleanly to `{twin.qualname}`: it differs where the "
            f"change edits `{mine.qualname}` (near line {span}); port it by hand"
        )
    else:
        lines = other.head_lines
        patched = [*lines[: twin.start - 1], *merge.lines, *lines[twin.end :]]
        patch = unified_diff(lines, patched, path=other.head_path)
    return FunctionDrift(
        function=_ref(path, after or mine, "head" if after is not None else "base", link),
        twin=_ref(other.head_path, twin, "head", link),
        change="modified" if after is not None else "removed",
        twin_changed=theirs.kind == "modified",
        similarity=round(alike, 3),
        hunk=hunk,
        patch=patch,
        patch_problem=problem,
    )


def _ref(path: str, d: Definition, side: Side, link: Linker) -> FunctionRef:
    url = link(path, side, d.start, d.end)
    return FunctionRef(path=path, qualname=d.qualname, start=d.start, end=d.end, url=url)


def _port(edit: Edit, twin: Definition) -> Merge:
    """The twin's lines with the edit merged in (none, for a removal), or where it conflicts.
    The edited function's lines are first indented as the twin is (a method's twin may be a
    module-level function); the twin's own lines are kept as they are."""
    assert edit.base is not None
    if edit.head is None:
        return Merge(())
    base, theirs = edit.base.reindented(twin.indent), edit.head.reindented(twin.indent)
    merged = merge3(base, twin.lines, theirs)
    if merged.lines is None:
        return merged
    return Merge(
        tuple(line if line.endswith(("\n", "\r")) else line + "\n" for line in merged.lines)
    )


def _changes(before: Definition, after: Definition) -> list[str]:
    """The tokens of the lines an edit removed and added, each line led by `-` or `+`: what
    "edited alike" compares (by tokens, so a port that spells one expression its own way is
    still alike)."""
    old, new = before.shape, after.shape
    marked: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            for mark, lines in (("-", old[i1:i2]), ("+", new[j1:j2])):
                for line in lines:
                    marked += [mark, *_TOKEN.findall(line)]
    return marked
