"""`cpci action`: what `action.yml` runs; every input comes from `CPCI_INPUT_*` variables."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpci.action.settings import ActionSettings
    from cpci.action.suite import SuiteOutcome


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
    return _test(settings) if settings.mode == "test" else _report(settings)


def _token_source(settings: ActionSettings) -> Any:
    from cpci.upload.credentials import bearer

    def token() -> str:
        return bearer(settings.auth, token=settings.token, audience=settings.oidc_audience,
                      environ=os.environ)  # fmt: skip

    return token


def _test(settings: ActionSettings) -> int:
    from cpci.action.suite import failure_annotations, run_suite, summary
    from cpci.action.workflow_commands import write_outputs, write_summary

    outcome = run_suite(settings)
    for line in failure_annotations(outcome):
        print(line, flush=True)
    # An empty shard (nothing collected: pytest exit 5, or all deselected) is uploaded too, so the
    # report does not wait for it forever; a broken session (usage, internal error) is not.
    empty_ok = outcome.pytest_exit in (0, 1, 5)
    wanted = bool(settings.server_url) and (bool(outcome.records) or empty_ok)
    report_url = _upload(settings, outcome) if wanted else ""
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


def _upload(settings: ActionSettings, outcome: SuiteOutcome) -> str:
    """Upload the shard; a service that is down never fails the shard: the upload is spooled."""
    from cpci.upload.credentials import CredentialsError
    from cpci.upload.envelope import EnvelopeError, RunFields, build_envelope
    from cpci.upload.send import Backoff, UploadFailed, deliver
    from cpci.upload.spool import Binding, Spool, default_spool_dir

    fields = RunFields(shard=f"{settings.shard_index}/{settings.shard_total}", leg=settings.leg)
    try:
        envelope = build_envelope(fields, outcome.all_records, os.environ)
        binding = Binding.for_job(settings.server_url, envelope.repository, os.environ)
        done = deliver(binding, _token_source(settings), envelope,
                       spool=Spool(default_spool_dir()), backoff=Backoff())  # fmt: skip
    except (EnvelopeError, CredentialsError, UploadFailed) as exc:
        print(f"::error title=cpci upload::{exc}", flush=True)
        return ""
    if done.receipt is None:
        print(f"::warning title=cpci upload::the service did not take the upload "
              f"({done.error}); it waits in {done.spooled} and the next upload on this runner "
              "sends it (the results file is also kept as an artifact)", flush=True)  # fmt: skip
        return ""
    receipt = done.receipt
    print(f"cpci: uploaded {receipt['results']} result(s), {receipt['shards']['text']}")
    from cpci.upload.ancestry import record_ancestry

    try:
        note = record_ancestry(
            settings.server_url, _token_source(settings)(), envelope, cwd=Path.cwd()
        )
    except CredentialsError as exc:
        note = f"commit ancestry not recorded: {exc}"
    if note:
        print(f"cpci: {note}", flush=True)
    return str(settings.server_url.rstrip("/") + receipt["run_url"])


def _report(settings: ActionSettings) -> int:
    from cpci.action.report import ReportError, exit_code, run_report
    from cpci.action.workflow_commands import write_outputs, write_summary
    from cpci.github.errors import GitHubError
    from cpci.upload.credentials import CredentialsError

    try:
        read_token = (
            _token_source(settings)() if settings.token or settings.auth == "oidc" else None
        )
        verdict, page = run_report(settings, os.environ, read_token)
    except (ReportError, GitHubError, CredentialsError) as exc:
        print(f"::error title=cpci report::{exc}", flush=True)
        return 2
    write_summary(
        os.environ.get("GITHUB_STEP_SUMMARY"), f"cpci: **{verdict}** · [report]({page})\n"
    )
    write_outputs(os.environ.get("GITHUB_OUTPUT"), {"report-url": page})
    print(f"cpci: {verdict}; {page}")
    return exit_code(verdict)
