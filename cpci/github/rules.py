"""The file-consistency rules file (`.github/cpci.yml` in the user's repository).

```yaml
fixes:                                   # what marks a PR as a fix (these are the defaults)
  title-prefixes: ["fix:", "fix("]       # its title starts so (any case)
  labels: []                             # or it has one of these labels
consistency:
  - name: dtensor-policy-worker          # letters, digits, . _ -; used in acknowledgements
    paths:                               # two or more paths or globs that change together
      - nemo_rl/models/policy/workers/dtensor_policy_worker.py
      - nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py
    severity: warn                       # warn (default) or fail
    message: Port the change to both workers.
    granularity: function                # file, or function: the default for two .py paths
    similarity: 0.75                     # how alike twins are, 0 to 1 (function level)
```

At function level a PR is checked function by function (`cpci.github.drift`), and a fix PR
that leaves a twin behind raises the rule's severity one step (warn to fail).

Parsed from YAML nodes, not plain data, so every error names the file, the line and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import yaml

DEFAULT_PATH = ".github/cpci.yml"
RULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
Severity = Literal["warn", "fail"]
Granularity = Literal["file", "function"]
#: How alike (difflib's ratio of their lines) a function and its twin must be to be twins.
DEFAULT_SIMILARITY = 0.75
_RULE_KEYS = {"name", "paths", "severity", "message", "granularity", "similarity"}
_FIXES_KEYS = {"title-prefixes", "labels"}


class RulesError(ValueError):
    """The rules file is not valid; the message starts with FILE:LINE."""


@dataclass(frozen=True)
class Rule:
    """Paths or globs that must change together; `severity` says whether a miss fails;
    `granularity` None is the default: function for a pair of .py files, else file."""

    name: str
    paths: tuple[str, ...]
    severity: Severity = "warn"
    message: str = ""
    granularity: Granularity | None = None
    similarity: float = DEFAULT_SIMILARITY

    @cached_property
    def patterns(self) -> tuple[Glob, ...]:
        return tuple(glob_pattern(p) for p in self.paths)

    @property
    def by_function(self) -> bool:
        """Whether the rule is checked function by function."""
        if self.granularity is None:
            return python_pair(self.paths)
        return self.granularity == "function"


def python_pair(paths: Sequence[str]) -> bool:
    """Two .py paths without wildcards: what function-level drift can compare."""
    return len(paths) == 2 and all(p.endswith(".py") and not set(p) & set("*?[") for p in paths)


@dataclass(frozen=True)
class FixMarkers:
    """What marks a PR as a fix: a title prefix (any case) or a label."""

    title_prefixes: tuple[str, ...] = ("fix:", "fix(")
    labels: tuple[str, ...] = ()

    def reason(self, title: str, labels: Iterable[str]) -> str:
        """Why a PR with this title and these labels is a fix; "" when it is not."""
        lowered = title.strip().lower()
        for prefix in self.title_prefixes:
            if lowered.startswith(prefix.lower()):
                return f"its title starts with `{prefix}`"
        for label in labels:
            if label in self.labels:
                return f"it has the label `{label}`"
        return ""


@dataclass(frozen=True)
class RuleSet:
    """A rules file: its consistency rules, in order, and what marks a fix."""

    rules: tuple[Rule, ...] = ()
    fixes: FixMarkers = FixMarkers()


class Steps:
    """Counts the matcher's inner steps, so a test can show it stays linear-ish."""

    def __init__(self) -> None:
        self.count = 0


@dataclass(frozen=True)
class Glob:
    """A path glob matched segment by segment: `*` and `?` stay within one path segment, a
    whole segment `**` spans any number of segments (zero included); `**` inside a segment is
    a plain `*`, as in .gitignore. No regular expression is built, so no pattern backtracks:
    a segment costs at most len(pattern) x len(segment) steps, and `**` segments add a factor
    of the path's depth, never an exponent."""

    source: str

    @cached_property
    def _segments(self) -> tuple[str, ...]:
        return tuple(self.source.split("/"))

    def fullmatch(self, path: str, steps: Steps | None = None) -> bool:
        """Whether `path` matches the whole glob."""
        counter = steps or Steps()
        globs, parts = self._segments, path.split("/")
        # reachable[j]: the globs seen so far can consume exactly parts[:j]
        reachable = [True] + [False] * len(parts)
        for glob in globs:
            if glob == "**":
                for j in range(1, len(parts) + 1):
                    reachable[j] = reachable[j] or reachable[j - 1]
                continue
            reachable = [False] + [
                reachable[j] and _segment_match(glob, parts[j], counter) for j in range(len(parts))
            ]
        return reachable[-1]


def _segment_match(pattern: str, text: str, steps: Steps) -> bool:
    """`*` and `?` wildcard matching of one segment, greedy with one backtrack point: the last
    `*` seen is the only one ever retried, which is enough and keeps it O(len x len)."""
    p = t = 0
    star, resume = -1, 0
    while t < len(text):
        steps.count += 1
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, t
            p += 1
        elif p < len(pattern) and pattern[p] in ("?", text[t]):
            p += 1
            t += 1
        elif star >= 0:
            resume += 1
            p, t = star + 1, resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def glob_pattern(glob: str) -> Glob:
    """A path glob: `*` and `?` stay within one directory, `**/` spans any number of them."""
    return Glob(glob)


def parse_rules(source: str, filename: str = DEFAULT_PATH) -> RuleSet:
    """The rules file's rules and fix markers; an empty file has none (and the defaults)."""
    try:
        root = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise RulesError(f"{filename}:{line}: not valid YAML: {exc.problem}") from exc
    if root is None:
        return RuleSet()
    where = _Where(filename)
    top = where.mapping(root, "the file")
    unknown = sorted(set(top) - {"consistency", "fixes"})
    if unknown:
        raise where.error(
            top[unknown[0]][0], f"unknown key {unknown[0]!r}; expected 'consistency' or 'fixes'"
        )
    fixes = where.fixes(top["fixes"][1]) if "fixes" in top else FixMarkers()
    if "consistency" not in top:
        return RuleSet((), fixes)
    entries = where.sequence(top["consistency"][1], "'consistency'")
    rules = [where.rule(entry) for entry in entries]
    seen: dict[str, int] = {}
    for entry, rule in zip(entries, rules, strict=True):
        if rule.name in seen:
            raise where.error(
                entry, f"rule name {rule.name!r} is used twice (first on line {seen[rule.name]})"
            )
        seen[rule.name] = entry.start_mark.line + 1
    return RuleSet(tuple(rules), fixes)


class _Where:
    def __init__(self, filename: str) -> None:
        self.filename = filename

    def error(self, node: yaml.Node, problem: str) -> RulesError:
        return RulesError(f"{self.filename}:{node.start_mark.line + 1}: {problem}")

    def mapping(self, node: yaml.Node, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping (key: value lines)")
        return {str(k.value): (k, v) for k, v in node.value}

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list (lines starting with '- ')")
        return list(node.value)

    def string(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
            raise self.error(node, f"{what} must be a non-empty string")
        return str(node.value)

    def rule(self, node: yaml.Node) -> Rule:
        fields = self.mapping(node, "each consistency rule")
        for key, (key_node, _) in fields.items():
            if key not in _RULE_KEYS:
                raise self.error(
                    key_node, f"unknown key {key!r} in a rule; expected {sorted(_RULE_KEYS)}"
                )
        for required in ("name", "paths"):
            if required not in fields:
                raise self.error(node, f"the rule has no {required!r}")
        name = self.string(fields["name"][1], "'name'")
        if not RULE_NAME.fullmatch(name):
            raise self.error(
                fields["name"][1],
                f"rule name {name!r} may only hold letters, digits, '.', '_' and '-' "
                "(it is typed in acknowledgements: cpci-ack: NAME)",
            )
        paths = [self.string(p, "each path") for p in self.sequence(fields["paths"][1], "'paths'")]
        if len(set(paths)) < 2:
            raise self.error(
                fields["paths"][1], f"rule {name!r} needs two or more different paths or globs"
            )
        severity: Severity = "warn"
        if "severity" in fields:
            given = self.string(fields["severity"][1], "'severity'")
            if given not in ("warn", "fail"):
                raise self.error(
                    fields["severity"][1], f"severity must be 'warn' or 'fail', got {given!r}"
                )
            severity = "fail" if given == "fail" else "warn"
        message = self.string(fields["message"][1], "'message'") if "message" in fields else ""
        granularity: Granularity | None = None
        if "granularity" in fields:
            node = fields["granularity"][1]
            given = self.string(node, "'granularity'")
            if given not in ("file", "function"):
                raise self.error(node, f"granularity must be 'file' or 'function', got {given!r}")
            if given == "function" and not python_pair(paths):
                raise self.error(
                    node,
                    f"rule {name!r}: granularity 'function' needs exactly two .py paths without "
                    "wildcards; use 'file' or name the two files",
                )
            granularity = "function" if given == "function" else "file"
        similarity = DEFAULT_SIMILARITY
        if "similarity" in fields:
            node = fields["similarity"][1]
            try:
                similarity = float(self.string(node, "'similarity'"))
            except ValueError:
                similarity = -1.0
            if not 0.0 < similarity <= 1.0:
                raise self.error(
                    node, f"similarity must be a number above 0 and at most 1, got {node.value!r}"
                )
        return Rule(name, tuple(paths), severity, message, granularity, similarity)

    def strings(self, node: yaml.Node, what: str) -> tuple[str, ...]:
        return tuple(self.string(item, f"each of {what}") for item in self.sequence(node, what))

    def fixes(self, node: yaml.Node) -> FixMarkers:
        fields = self.mapping(node, "'fixes'")
        for key, (key_node, _) in fields.items():
            if key not in _FIXES_KEYS:
                raise self.error(
                    key_node, f"unknown key {key!r} in 'fixes'; expected {sorted(_FIXES_KEYS)}"
                )
        defaults = FixMarkers()
        return FixMarkers(
            self.strings(fields["title-prefixes"][1], "'title-prefixes'")
            if "title-prefixes" in fields
            else defaults.title_prefixes,
            self.strings(fields["labels"][1], "'labels'") if "labels" in fields else (),
        )
