"""The functions and methods of a Python module, with their lines: what function-level drift
compares between two files of a pair.

A definition is a module-level function or a method (of a class, or of a class inside one),
from its first decorator to its last line (`ast`'s `end_lineno`). Functions nested inside a
function belong to it: a change inside them is a change of the outer one. Definitions under a
module-level `if` or `try` count as well. A name defined twice in one scope (a property's getter
and setter) gets `#2`, `#3` after its second and later definitions, so every name is unique.
"""

from __future__ import annotations

import ast
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property


@dataclass(frozen=True)
class Definition:
    """One function or method: `qualname` is `Class.method` or `function`; `start` and `end`
    are 1-based and inclusive; `lines` are the source lines between, with their line ends."""

    qualname: str
    start: int
    end: int
    lines: tuple[str, ...]

    @property
    def owner(self) -> str:
        """The class path (`Outer.Inner`), or "" for a module-level function."""
        return self.qualname.rpartition(".")[0]

    @property
    def name(self) -> str:
        """The last part of `qualname` (with its `#2` where it has one)."""
        return self.qualname.rpartition(".")[2]

    @property
    def indent(self) -> str:
        """The indentation of its first line (a method's is one level in)."""
        first = self.lines[0] if self.lines else ""
        return first[: len(first) - len(first.lstrip())]

    def reindented(self, indent: str) -> tuple[str, ...]:
        """The lines with the first line's indentation replaced by `indent`, where they start
        with it (a line of a multi-line string that starts further left stays as it is)."""
        cut = self.indent
        return tuple(
            indent + line[len(cut) :] if line.startswith(cut) and line.strip() else line
            for line in self.lines
        )

    @cached_property
    def shape(self) -> tuple[str, ...]:
        """The lines as compared: dedented (a method moved out of its class is the same
        function), right-stripped, blank lines left out, and its own name left out of its
        `def` line (a renamed function is the same function)."""
        lines = [line.rstrip() for line in self.reindented("") if line.strip()]
        signature = f"def {self.name.partition('#')[0]}("
        for i, line in enumerate(lines):
            if signature in line:
                lines[i] = line.replace(signature, "def (", 1)
                break
        return tuple(lines)


def split_lines(text: str) -> list[str]:
    """Lines with their ends, split where Python's tokenizer splits them (`\\n`, `\\r\\n`,
    `\\r`), so they line up with `ast`'s line numbers; `str.splitlines` also splits at form
    feeds and other separators a source file may hold inside a string."""
    return io.StringIO(text, newline="").readlines()


def definitions(source: str) -> list[Definition]:
    """The module's definitions in source order; raises SyntaxError for text that is not
    Python (the caller says which file, and checks it file by file)."""
    tree = ast.parse(source)
    lines = split_lines(source)
    found: list[Definition] = []
    seen: dict[str, int] = {}
    for qualname, node in _walk(tree, ""):
        seen[qualname] = seen.get(qualname, 0) + 1
        unique = qualname if seen[qualname] == 1 else f"{qualname}#{seen[qualname]}"
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end = node.end_lineno or node.lineno
        found.append(Definition(unique, start, end, tuple(lines[start - 1 : end])))
    return found


def _walk(
    node: ast.AST, prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.stmt):  # if / try / with blocks at module or class level
            yield from _walk(child, prefix)


def similarity(a: Sequence[str], b: Sequence[str], floor: float = 0.0) -> float:
    """How alike two line sequences are, from 0 to 1 (difflib's ratio: twice the matched lines
    over all lines). No line is treated as junk: in code, the common lines are the signal.
    Below `floor` an upper bound may be returned instead, which is cheaper to compute."""
    if not a and not b:
        return 1.0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    bound = matcher.real_quick_ratio()
    if bound >= floor:
        bound = matcher.quick_ratio()
    return matcher.ratio() if bound >= floor else bound
