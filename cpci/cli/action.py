"""`cpci action`: what `action.yml` runs; every input comes from `CPCI_INPUT_*` variables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "action",
        help="run as the GitHub Action (inputs from CPCI_INPUT_* environment variables)",
        description="Used by action.yml. Test mode runs this shard and uploads it; report mode "
        "posts the PR comment and check run. See README.md, 'GitHub Action'.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.action import ActionSettings
    from cpci.action.settings import ActionSettingsError

    try:
        settings = ActionSettings.from_env()
    except ActionSettingsError as exc:
        print(f"::error title=cpci action::{exc}", file=sys.stdout)
        return 2
    if settings.mode == "test":
        return _test(settings)
    print("::error title=cpci action::report mode is not available in this version", flush=True)
    return 2


def _test(settings: Any) -> int:
    from cpci.action.suite import failure_annotations, run_suite, summary
    from cpci.action.workflow_commands import write_outputs, write_summary

    outcome = run_suite(settings)
    for line in failure_annotations(outcome):
        print(line, flush=True)
    report_url = ""
    write_summary(os.environ.get("GITHUB_STEP_SUMMARY"), summary(outcome, settings, report_url))
    counts = outcome.counts()
    write_outputs(
        os.environ.get("GITHUB_OUTPUT"),
        {**{k: str(v) for k, v in counts.items()}, "report-url": report_url},
    )
    if outcome.pytest_exit not in (0, 1):
        return outcome.pytest_exit  # a usage or collection error: never hide it
    if settings.fail_on == "any-failure" and counts["failed"]:
        return 1
    return 0
