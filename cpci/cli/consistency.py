"""`cpci consistency --base REF --head REF`: the file-consistency rules on a local checkout.

For use inside a workflow (no service, no GitHub token needed): exits 1 when a `severity: fail`
rule is broken and not acknowledged, 2 when the rules file or git is wrong, else 0. The rules are
read at `--base`, as the service reads them at the PR's base commit: a PR cannot delete or weaken
the rule it is checked against. `--ack` (the workflow's, a maintainer's word) waives any rule; a
`cpci-ack: RULE` line of `--body-file` (the author's) only `warn` rules. A pair of Python files
is read with git at the merge base and the head and checked function by function, as the
service does through GitHub: the same drifts, hunks and patches (`--patch-dir` writes each
patch to a file for `git apply`); `--title` and `--label` tell a fix, as the PR's would.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpci.github.consistency import ConsistencyResult
    from cpci.github.drift import FunctionDrift


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "consistency",
        help="check that declared file groups changed together",
        description="Example: cpci consistency --base origin/main --head HEAD "
        "(rules in .github/cpci.yml; see docs/github.md)",
    )
    parser.add_argument("--base", required=True, help="the PR's base ref or commit")
    parser.add_argument("--head", default="HEAD", help="the PR's head ref or commit")
    parser.add_argument(
        "--rules",
        default=None,
        metavar="PATH",
        help="rules file inside the repository, read at --base (default: .github/cpci.yml)",
    )
    parser.add_argument(
        "--rules-file",
        default=None,
        metavar="FILE",
        help="a rules file on disk, read as it is (to try rules out; the PR could edit it)",
    )
    parser.add_argument("--repo", default=".", help="the git checkout (default: .)")
    parser.add_argument(
        "--ack",
        action="append",
        default=[],
        metavar="RULE",
        help="acknowledge RULE, even a fail rule, as a cpci-ack:RULE label does (repeatable)",
    )
    parser.add_argument(
        "--body-file",
        default=None,
        help="PR body to read `cpci-ack: RULE` lines from (they acknowledge warn rules only)",
    )
    parser.add_argument(
        "--title",
        default="",
        help="the PR's title: a fix's (e.g. `fix: ...`) raises drifts to fail",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label of the PR, for the rules' fix labels (repeatable; acks are --ack)",
    )
    parser.add_argument(
        "--max-file-bytes",
        type=_positive,
        default=None,
        metavar="N",
        help="a pair file over N bytes is checked file by file (default: the service's bound)",
    )
    parser.add_argument(
        "--patch-dir",
        default=None,
        metavar="DIR",
        help="write each patch for a twin to DIR/RULE--FUNCTION.patch (apply with git apply)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def run(args: argparse.Namespace) -> int:
    from cpci.github.consistency import Acknowledgements, acknowledgements, evaluate
    from cpci.github.gitdiff import GitError, changed_files, file_at
    from cpci.github.pair_files import MAX_FILE_BYTES, GitPairReader
    from cpci.github.rules import DEFAULT_PATH, RulesError, parse_rules

    text: str | None
    try:
        if args.rules_file:
            name, text = args.rules_file, _read(args.rules_file)
        else:
            path = args.rules or DEFAULT_PATH
            name, text = f"{path} at {args.base}", file_at(args.base, path, args.repo)
        if text is None:
            if args.rules:
                print(f"cpci consistency: no {args.rules} at {args.base}", file=sys.stderr)
                return 2
            print(f"cpci consistency: no {DEFAULT_PATH} at {args.base}, so no rules to check")
            return 0
        rules = parse_rules(text, name)
        files = changed_files(args.base, args.head, args.repo)
        body = _read(args.body_file) if args.body_file else ""
        from_body = acknowledgements((), body)
        acks = Acknowledgements(frozenset(args.ack), from_body.author)
        bound = args.max_file_bytes or MAX_FILE_BYTES
        reader = GitPairReader(args.repo, args.base, args.head, bound)
        result = evaluate(rules, files, acks, reader=reader, title=args.title, labels=args.label)
        written = _write_patches(result, Path(args.patch_dir)) if args.patch_dir else []
    except (RulesError, GitError, OSError) as exc:
        print(f"cpci consistency: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        _print(result, annotate=os.environ.get("GITHUB_ACTIONS") == "true")
        for path in written:
            print(f"wrote {path}")
    return 1 if result.failed else 0


def _read(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def _write_patches(result: ConsistencyResult, folder: Path) -> list[Path]:
    """Each drift's patch for its twin, one file each, named for the rule and the function."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for finding in result.findings:
        for drift in finding.drifts:
            if drift.patch is None:
                continue
            name = re.sub(r"[^A-Za-z0-9._#-]", "_", f"{finding.rule}--{drift.function.qualname}")
            path = folder / f"{name}.patch"
            path.write_text(drift.patch, encoding="utf-8")
            written.append(path)
    return written


def _print(result: ConsistencyResult, *, annotate: bool) -> None:
    for f in result.findings:
        if f.granularity == "function":
            what = "; ".join([f"changed {', '.join(f.files)}", *f.tally()])
        else:
            what = f"changed {', '.join(f.files)} but not {', '.join(f.unchanged)}"
            if f.file_level_because:
                what += f" (checked file by file: {f.file_level_because})"
        line = f"{f.level}: rule {f.rule}: {what}. {f.message}"
        if f.acknowledged:
            line += " (acknowledged)"
        print(line)
        if annotate and f.level != "note":  # a workflow-command annotation on the PR
            kind = "error" if f.level == "fail" else "warning"
            print(f"::{kind} title=cpci consistency ({f.rule})::{line}")
        for drift in f.drifts:
            _print_drift(f.rule, drift, annotate=annotate)
    print(
        f"{len(result.findings)} finding(s) from {result.rules} rule(s) over "
        f"{result.files} changed file(s)"
    )


def _print_drift(rule: str, drift: FunctionDrift, *, annotate: bool) -> None:
    done = "was removed" if drift.change == "removed" else "changed"
    twin = "changed otherwise" if drift.twin_changed else "did not"
    one, other = drift.function, drift.twin
    line = (
        f"{drift.level}: rule {rule}: {one.qualname} ({one.path}:{one.start}-{one.end}) {done}; "
        f"its twin {other.qualname} ({other.path}:{other.start}-{other.end}) {twin} "
        f"({drift.similarity:.0%} alike before)"
    )
    if drift.acknowledged:
        print(line + " (acknowledged)")
        return
    print(f"{line}. To acknowledge only this one: cpci-ack: {rule}:{one.qualname}")
    if drift.note:
        print(drift.note)
    if annotate:
        kind = "error" if drift.level == "fail" else "warning"
        print(
            f"::{kind} file={one.path},line={one.start},endLine={one.end},"
            f"title=cpci consistency ({rule})::{line}"
        )
    print(drift.hunk, end="")
    if drift.patch is not None:
        print(f"the same change for {other.path} (applies at the head; git apply):")
        print(drift.patch, end="")
    else:
        print(drift.patch_problem)
