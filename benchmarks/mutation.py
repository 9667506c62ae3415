"""Mutation scores of the modules the verdict rests on: how many small wrong versions of each
module its own tests catch.

Each mutant changes one operator or constant of one module (a comparison turned around, `and`
for `or`, a `not` dropped, a number off by one, `True` for `False`, an `if` negated), in a scratch
copy of the repository, and the module's tests run against it (`-x`, stopping at the first
failure). A mutant the tests pass is a *survivor*: a wrong program the tests cannot tell from
the right one. Survivors are listed with their line, to read. Mutants are drawn evenly over each
module (`--per-module`, seeded) so a run takes minutes, not hours.

    .venv/bin/python benchmarks/mutation.py [--per-module 40] [--target NAME ...] [--seed 1]
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """A module and the tests that speak for it."""

    name: str
    module: str
    tests: tuple[str, ...]


TARGETS = (
    Target(
        "verdicts",
        "cpci/server/analysis/verdicts.py",
        (
            "tests/server/analysis/test_verdicts.py",
            "tests/server/analysis/test_pull_report.py",
            "tests/server/analysis/test_rerun_verdicts.py",
        ),
    ),
    Target(
        "evidence",
        "cpci/evidence/chance.py",
        (
            "tests/server/analysis/test_verdicts.py",
            "tests/evidence/test_reruns.py",
            "tests/evidence/test_chance.py",
        ),
    ),
    Target("agreement", "cpci/runner/wire/agreement.py", ("tests/runner/wire/test_agreement.py",)),
    Target("comment", "cpci/github/comment.py", ("tests/github/test_comment.py",)),
    Target(
        "retry",
        "cpci/github/retry.py",
        ("tests/github/test_retry.py", "tests/github/test_client.py"),
    ),
)


@dataclass(frozen=True)
class Mutant:
    line: int
    what: str
    source: str  # the whole module, mutated


_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
}


Change = Callable[[ast.AST], ast.AST]


def mutants(source: str) -> Iterator[Mutant]:
    """Every one-change mutant of `source`, in source order (docstrings are left alone)."""
    sites = _sites(ast.parse(source))
    for index, node in enumerate(sites):
        for what, change in _changes(node):
            mutated = ast.parse(source)
            twin = _sites(mutated)[index]
            replacement = change(twin)
            if replacement is not twin:
                _replace(mutated, twin, replacement)
            yield Mutant(getattr(node, "lineno", 0), what, ast.unparse(mutated))


def _sites(tree: ast.AST) -> list[ast.AST]:
    """The nodes a mutant may change: all but docstrings, in a fixed (walk) order."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [node for node in ast.walk(tree) if id(node) not in docstrings]


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    """Put `new` where `old` is in `tree`."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return


def _set(node: ast.AST, field: str, value: object) -> ast.AST:
    setattr(node, field, value)
    return node


def _changes(node: ast.AST) -> Iterator[tuple[str, Change]]:
    """(description, a change of the twin node returning what takes its place) per mutation."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None:

                def turn(n: ast.AST, i: int = i, swap: type[ast.cmpop] = swap) -> ast.AST:
                    assert isinstance(n, ast.Compare)
                    n.ops[i] = swap()
                    return n

                yield f"{type(op).__name__} -> {swap.__name__}", turn
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield f"{type(node.op).__name__} -> {other.__name__}", lambda n: _set(n, "op", other())
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
        swap = _BINOP_SWAPS[type(node.op)]
        yield f"{type(node.op).__name__} -> {swap.__name__}", lambda n: _set(n, "op", swap())
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not dropped", lambda n: n.operand if isinstance(n, ast.UnaryOp) else n
    elif isinstance(node, ast.If | ast.While):
        yield "condition negated", lambda n: _set(n, "test", ast.UnaryOp(ast.Not(), n.test))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield f"{node.value} -> {not node.value}", lambda n: _set(n, "value", not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield f"{node.value!r} -> {node.value + 1!r}", lambda n: _set(n, "value", node.value + 1)


def run_mutant(scratch: Path, target: Target, mutant: Mutant, timeout_s: float) -> str:
    """'killed', 'survived' or 'timeout' for one mutant, in the scratch copy."""
    path = scratch / target.module
    original = path.read_text()
    path.write_text(mutant.source)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *target.tests],
            cwd=scratch,
            env=_environment(scratch),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        path.write_text(original)
    return "survived" if done.returncode == 0 else "killed"


def _environment(scratch: Path) -> dict[str, str]:
    """The scratch copy first on the path; the shared reference where the repository's is, and
    every prerequisite promised, so a test that would skip fails instead (a skipped test
    kills no mutant)."""
    return {
        **os.environ,
        "PYTHONPATH": str(scratch),
        "CPCI_REFERENCE_DIR": str(ROOT.parent / "shared" / "reference"),
        "CPCI_TEST_REQUIRE": "all",
    }


def scratch_copy(into: Path) -> Path:
    """The repository's code and tests, copied, so mutants never touch the working tree."""
    for part in ("cpci", "tests", "pyproject.toml"):
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, into / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / part)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-module", type=int, default=40, help="mutants drawn per module")
    parser.add_argument("--target", action="append", choices=[t.name for t in TARGETS])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    args = parser.parse_args()
    chosen = [t for t in TARGETS if not args.target or t.name in args.target]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"mutation scores, {args.per_module} mutants per module (seed {args.seed}); load {load}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = scratch_copy(Path(tmp))
        check = subprocess.run(
            [sys.executable, "-c", "import cpci; print(cpci.__file__)"],
            cwd=scratch,
            env=_environment(scratch),
            capture_output=True,
            text=True,
        )
        if not check.stdout.startswith(str(scratch)):
            raise SystemExit(f"the scratch copy is not the cpci imported: {check.stdout}")
        for target in chosen:
            every = list(mutants((ROOT / target.module).read_text()))
            drawn = random.Random(f"{args.seed}:{target.name}").sample(
                every, min(args.per_module, len(every))
            )
            start = time.perf_counter()
            outcomes = [(m, run_mutant(scratch, target, m, args.timeout)) for m in drawn]
            killed = sum(o != "survived" for _, o in outcomes)
            took = time.perf_counter() - start
            print(
                f"{target.name:10s} {killed}/{len(drawn)} killed "
                f"({100 * killed / max(1, len(drawn)):.0f}%) of {len(every)} possible mutants, "
                f"{took:.0f} s"
            )
            for mutant, outcome in outcomes:
                if outcome == "survived":
                    print(f"    survived: {target.module}:{mutant.line}: {mutant.what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
