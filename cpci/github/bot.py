"""What the bot does for one pull request: check consistency, render, publish.

Called by the service on `pull_request` (opened, synchronize, reopened) and `workflow_run`
(completed) webhooks. The rules are read at the PR's *base* commit, so a PR cannot switch off
the rules it is checked against; a rule's pair of Python files is read through the contents API
(no checkout, no clone: `cpci.github.pair_files`) and checked function by function. Storage and
the report are injected (the service passes its database; tests pass dicts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cpci import urls
from cpci.github.acks import pull_acknowledgements
from cpci.github.client import GitHubClient
from cpci.github.comment import CommentOptions, render
from cpci.github.consistency import ConsistencyResult, evaluate
from cpci.github.gate import FailOn
from cpci.github.models import PullRequest
from cpci.github.pair_files import MAX_FILE_BYTES, GitHubPairReader
from cpci.github.publish import CommentMode, check_run_fields, publish_check, upsert_comment
from cpci.github.rules import DEFAULT_PATH, RulesError, RuleSet, parse_rules
from cpci.schema import PullRequestReport

ReportLoader = Callable[[str, int], PullRequestReport | None]


@dataclass(frozen=True)
class BotSettings:
    """How the bot publishes. Without `bot_login` it is asked of GitHub (`GET /app`, `GET
    /user`): a comment is only ever adopted when it carries the marker *and* is the bot's own."""

    comment_mode: CommentMode = "edit"
    fail_on: FailOn = "new-failures"
    bot_login: str | None = None
    service_url: str | None = None
    rules_path: str = DEFAULT_PATH
    #: The most bytes read of a file (the rules, a pair's files); a pair file over it is
    #: checked file by file, and says so.
    max_file_bytes: int = MAX_FILE_BYTES


@dataclass(frozen=True)
class PullState:
    """What was published last time, so the next run edits rather than duplicates."""

    head_sha: str
    comment_id: int | None = None
    check_run_id: int | None = None
    consistency: ConsistencyResult | None = None


def check_consistency(
    client: GitHubClient,
    repo: str,
    pull: PullRequest,
    rules_path: str,
    labelled_by: Mapping[str, str] | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> ConsistencyResult:
    """The rules at the PR's base against its files, with the acks that count (`labelled_by`:
    who added a label, from the `labeled` delivery at hand; see `cpci.github.acks`); a pair
    of Python files is read through the contents API and checked function by function, and
    the PR's title and labels say whether it is a fix."""
    found = client.get_file(repo, rules_path, pull.base_sha, max_bytes=max_file_bytes)
    acked = pull_acknowledgements(client, repo, pull, labelled_by=labelled_by)
    if found is not None and found.text is None:
        too_large = f"{rules_path}: {found.size:,} bytes, over the {max_file_bytes:,}-byte bound"
        return ConsistencyResult(rules=0, files=0, findings=[], error=too_large)
    try:
        rules = parse_rules(found.text, rules_path) if found and found.text else RuleSet()
    except RulesError as exc:
        return ConsistencyResult(rules=0, files=0, findings=[], error=str(exc))
    return evaluate(
        rules,
        client.list_pull_files(repo, pull.number),
        acked,
        reader=GitHubPairReader(client, repo, pull, max_file_bytes),
        title=pull.title,
        labels=pull.labels,
    )


def refresh(
    client: GitHubClient,
    repo: str,
    number: int,
    *,
    settings: BotSettings,
    load_report: ReportLoader,
    previous: PullState | None,
    recheck_files: bool = True,
    labelled_by: Mapping[str, str] | None = None,
) -> PullState:
    """Bring the PR's comment and check run up to date; returns what to remember.
    `labelled_by`: who added which label, from the `labeled` delivery being handled."""
    pull = client.get_pull(repo, number)
    same_head = previous is not None and previous.head_sha == pull.head_sha
    if recheck_files or not same_head or previous is None or previous.consistency is None:
        consistency = check_consistency(
            client, repo, pull, settings.rules_path, labelled_by, settings.max_file_bytes
        )
    else:
        consistency = previous.consistency
    report = load_report(repo, number)
    if report is not None and report.head_commit != pull.head_sha:
        report = None  # results are for an older push: no verdict for this head yet
    options = CommentOptions(service_url=settings.service_url, fail_on=settings.fail_on)
    body = render(report, consistency, options, repository=repo, pull_request=number)
    published = upsert_comment(
        client,
        repo,
        number,
        body,
        mode=settings.comment_mode,
        bot_login=settings.bot_login or client.bot_login(),
        known_id=previous.comment_id if previous else None,
    )
    details = (
        settings.service_url.rstrip("/") + urls.pull(repo, number) if settings.service_url else None
    )
    fields = check_run_fields(
        report,
        consistency,
        head_sha=pull.head_sha,
        fail_on=settings.fail_on,
        details_url=details,
    )
    check_id = publish_check(
        client, repo, fields, known_id=previous.check_run_id if previous and same_head else None
    )
    return PullState(pull.head_sha, published.comment_id, check_id, consistency)
