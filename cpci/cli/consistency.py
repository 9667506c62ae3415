"""`cpci consistency --base REF --head REF`: the file-consistency rules on a local checkout.

For use inside a workflow (no service, no GitHub token needed): exits 1 when a `severity: fail`
rule is broken and not acknowledged, 2 when the rules file or git is wrong, else 0. The rules are
read at `--base`, as the service reads them at the PR's base commit: a PR cannot delete or weaken
the rule it is checked against. `--ack` (the workflow's, a maintainer's word) waives any rule; a
`cpci-ack: RULE` line of `--body-file` (the author's) only `warn` rules.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


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
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.github.consistency import Acknowledgements, acknowledgements, evaluate
    from cpci.github.gitdiff import GitError, changed_files, file_at
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
    except (RulesError, GitError, OSError) as exc:
        print(f"cpci consistency: {exc}", file=sys.stderr)
        return 2
    from_body = acknowledgements((), body)
    acks = Acknowledgements(frozenset(args.ack), from_body.author)
    result = evaluate(rules, files, acks)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        _print(result, annotate=os.environ.get("GITHUB_ACTIONS") == "true")
    return 1 if result.failed else 0


def _read(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def _print(result: Any, *, annotate: bool) -> None:
    for f in result.findings:
        line = (
            f"{f.level}: rule {f.rule}: changed {', '.join(f.files)} but not "
            f"{', '.join(f.unchanged)}. {f.message}"
        )
        if f.acknowledged:
            line += " (acknowledged)"
        print(line)
        if annotate and f.level != "note":  # a workflow-command annotation on the PR
            kind = "error" if f.level == "fail" else "warning"
            print(f"::{kind} title=cpci consistency ({f.rule})::{line}")
    print(
        f"{len(result.findings)} finding(s) from {result.rules} rule(s) over "
        f"{result.files} changed file(s)"
    )
