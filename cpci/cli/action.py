"""`cpci action`: what `action.yml` runs; every input comes from `CPCI_INPUT_*` variables."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpci.action.settings import ActionSettings
    from cpci.action.suite_mode import SuiteOutcome
    from cpci.schema import ShardPlan
    from cpci.upload.credentials import HeldToken


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "action",
        help="run as the GitHub Action (inputs from CPCI_INPUT_* environment variables)",
        description="Used by action.yml. Test mode runs this shard and uploads it; report mode "
        "posts the PR comment and check run. See README.md, 'GitHub Action'.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cpci.action.settings import ActionSettings, ActionSettingsError

    try:
        settings = ActionSettings.from_env()
    except ActionSettingsError as exc:
        print(f"::error title=cpci action::{exc}", flush=True)
        return 2
    return _test_mode(settings) if settings.mode == "test" else _report_mode(settings)


def _test_mode(settings: ActionSettings) -> int:
    from cpci.action.durations_fetch import choose_durations, choose_evidence, warning_line
    from cpci.action.process_guard import guard_this_process
    from cpci.action.suite_mode import failure_annotations, run_suite, summary
    from cpci.action.workflow_commands import write_outputs, write_summary
    from cpci.schema import plan_path
    from cpci.upload.unsent import unsent_path

    guard_this_process()  # first: what this process starts never reads its env or memory
    token = _credential(settings)  # before the tests: they never see what it is made from
    durations = choose_durations(settings, os.environ, token or _anonymous, cwd=Path.cwd())
    if durations.warning:
        print(warning_line(durations), flush=True)
    print(f"cpci: shards balance by durations from {durations.source}", flush=True)
    evidence = choose_evidence(settings, os.environ, token or _anonymous, cwd=Path.cwd())
    if evidence.warning:
        print(warning_line(evidence), flush=True)
    for earlier in (plan_path(settings.results), unsent_path(settings.results)):
        Path(earlier).unlink(missing_ok=True)  # an earlier job's, on this runner
    outcome = run_suite(
        settings, durations=durations.path, evidence=evidence.path, changed=evidence.changed
    )
    plan = _plan(settings)
    for line in failure_annotations(outcome):
        print(line, flush=True)
    # An empty shard (nothing collected: pytest exit 5, or all deselected) is uploaded too, so the
    # report does not wait for it forever; a broken session (usage, internal error) is not.
    empty_ok = outcome.pytest_exit in (0, 1, 5)
    wanted = bool(settings.server_url) and (bool(outcome.records) or empty_ok)
    uploaded = _upload(settings, outcome, plan, token) if wanted and token else ""
    report_url = uploaded or ""
    write_summary(os.environ.get("GITHUB_STEP_SUMMARY"), summary(outcome, settings, report_url))
    counts = outcome.counts()
    write_outputs(
        os.environ.get("GITHUB_OUTPUT"),
        {
            **{k: str(v) for k, v in counts.items()},
            "report-url": report_url,
            "plan-hash": plan.plan_hash if plan is not None else "",
            "durations-from": durations.source,
        },
    )
    if outcome.pytest_exit not in (0, 1):
        return outcome.pytest_exit  # a usage or collection error: never hide it
    if uploaded is None:
        return 1  # the shard is neither stored nor spooled: the report would wait for it
    if settings.fail_on == "any-failure" and counts["failed"]:
        return 1
    return 0


def _credential(settings: ActionSettings) -> HeldToken | None:
    """The upload's credential, got now, before the tests start (None without a service): the
    tests run without the variables an OIDC token is minted with, and a token that expires
    before the upload is got again by this process (see `HeldToken`)."""
    from cpci.upload.errors import CredentialsError

    if not settings.server_url:
        return None
    held = settings.upload_settings().held_token(
        os.environ, announce=lambda line: print(f"cpci: {line}", flush=True)
    )
    try:
        held()
    except CredentialsError as exc:
        print(f"::warning title=cpci credentials::{exc}; the upload tries again", flush=True)
    return held


def _anonymous() -> None:
    return None


def _plan(settings: ActionSettings) -> ShardPlan | None:
    """The plan the runner wrote beside the results (None if it wrote none, or a bad one)."""
    from cpci.upload.errors import UploadError
    from cpci.upload.plan_file import plan_for

    try:
        return plan_for([settings.results])
    except UploadError as exc:
        print(f"::warning title=cpci plan::{exc}", flush=True)
        return None


def _upload(
    settings: ActionSettings, outcome: SuiteOutcome, plan: ShardPlan | None, token: HeldToken
) -> str | None:
    """Upload the shard; returns the run's page, "" when spooled (a service that is down never
    fails the shard), None when it is neither stored nor spooled (the step then fails: a refused
    upload is kept beside the results, and kept as an artifact with them)."""
    from cpci.upload.envelope import RunFields, build_envelope
    from cpci.upload.errors import UploadError
    from cpci.upload.retry import Backoff
    from cpci.upload.shard_upload import upload_shard
    from cpci.upload.unsent import unsent_path

    fields = RunFields(
        shard=f"{settings.shard_index}/{settings.shard_total}",
        leg=settings.leg,
        started_at=outcome.started_at,
        ended_at=outcome.ended_at,
    )
    try:
        envelope = build_envelope(fields, outcome.all_records, os.environ, plan)
        done = upload_shard(
            settings.upload_settings(),
            envelope,
            os.environ,
            backoff=Backoff(),
            cwd=Path.cwd(),
            keep=Path.cwd() / unsent_path(settings.results),
            token=token,
        )
    except UploadError as exc:
        print(f"::error title=cpci upload::{exc}", flush=True)
        return None
    delivered = done.delivered
    if delivered.receipt is None:
        print(
            f"::warning title=cpci upload::the service did not take the upload "
            f"({delivered.error}); it waits in {delivered.spooled} and the next upload on this "
            "runner sends it (the results file is also kept as an artifact)",
            flush=True,
        )
        return ""
    receipt = delivered.receipt
    print(f"cpci: uploaded {receipt.results} result(s), {receipt.shards.text}")
    if done.ancestry:
        print(f"cpci: {done.ancestry}", flush=True)
    return settings.server_url.rstrip("/") + receipt.run_url


def _report_mode(settings: ActionSettings) -> int:
    from cpci.action.report_mode import ReportModeError, exit_code, run_report_mode
    from cpci.action.workflow_commands import write_outputs, write_summary
    from cpci.github.errors import GitHubError
    from cpci.upload.errors import UploadError

    try:
        upload = settings.upload_settings()
        wants_token = bool(settings.token) or settings.auth == "oidc"
        read_token = upload.token_source(os.environ)() if wants_token else None
        verdict, page = run_report_mode(settings, os.environ, read_token)
    except (ReportModeError, GitHubError, UploadError) as exc:
        print(f"::error title=cpci report::{exc}", flush=True)
        return 2
    write_summary(
        os.environ.get("GITHUB_STEP_SUMMARY"), f"cpci: **{verdict}** · [report]({page})\n"
    )
    write_outputs(os.environ.get("GITHUB_OUTPUT"), {"report-url": page})
    print(f"cpci: {verdict}; {page}")
    return exit_code(verdict)
