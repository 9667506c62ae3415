"""`cpci consistency --base REF --head REF`: the file-consistency rules on a local checkout.

For use inside a workflow (no service, no GitHub token needed): exits 1 when a `severity: fail`
rule is broken and not acknowledged, 2 when the rules file or git is wrong, else 0.
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
    parser.add_argument("--rules", default=None, help="rules file (default: .github/cpci.yml)")
    parser.add_argument("--repo", default=".", help="the git checkout (default: .)")
    parser.add_argument(
        "--ack", action="append", default=[], metavar="RULE", help="acknowledge RULE (repeatable)"
    )
    parser.add_argument(
        "--body-file", default=None, help="PR body to read `cpci-ack: RULE` lines from"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.github.consistency import acknowledgements, evaluate
    from cpci.github.gitdiff import GitError, changed_files
    from cpci.github.rules import DEFAULT_PATH, RulesError, parse_rules

    rules_path = Path(args.rules) if args.rules else Path(args.repo) / DEFAULT_PATH
    if not rules_path.is_file():
        if args.rules:
            print(f"cpci consistency: no rules file at {rules_path}", file=sys.stderr)
            return 2
        print(f"cpci consistency: no {DEFAULT_PATH}, so no rules to check")
        return 0
    try:
        rules = parse_rules(rules_path.read_text(encoding="utf-8"), str(rules_path))
        files = changed_files(args.base, args.head, args.repo)
        body = Path(args.body_file).read_text(encoding="utf-8") if args.body_file else ""
    except (RulesError, GitError, OSError) as exc:
        print(f"cpci consistency: {exc}", file=sys.stderr)
        return 2
    result = evaluate(rules, files, acknowledgements((), body) | set(args.ack))
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        _print(result, annotate=os.environ.get("GITHUB_ACTIONS") == "true")
    return 1 if result.failed else 0


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
