"""Publishing to a PR: the one comment (edited in place) and the `cpci` check run.

The comment is found by its hidden marker, written by the bot's login, preferring the id stored
from last time; an unchanged body is not written again (no notification, no rate limit spent).
`new-on-regression` posts a fresh comment when the PR turns from green to red, because an edit
notifies nobody.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from cpci.github.client import GitHubClient, StatusState
from cpci.github.comment import MARKER, gate_recorded_in, storm_line
from cpci.github.consistency import ConsistencyResult
from cpci.github.errors import PermissionDenied
from cpci.github.gate import FailOn, Gate, gate, gating_text
from cpci.github.models import Comment
from cpci.schema import VERDICTS, PullRequestReport

CommentMode = Literal["edit", "new-on-regression", "off"]
COMMENT_MODES: tuple[CommentMode, ...] = get_args(CommentMode)
CHECK_NAME = "cpci"
#: The check-run output fields' limit (characters).
OUTPUT_LIMIT = 65_535


@dataclass(frozen=True)
class Published:
    action: Literal["created", "updated", "unchanged", "skipped"]
    comment_id: int | None


def find_comment(
    comments: list[Comment], *, bot_login: str | None, known_id: int | None
) -> Comment | None:
    """Our comment: marker first line, by the bot, the stored id preferred, else the latest."""
    ours = [
        c
        for c in comments
        if c.body.startswith(MARKER) and (bot_login is None or c.user_login == bot_login)
    ]
    for c in ours:
        if c.id == known_id:
            return c
    return ours[-1] if ours else None


def upsert_comment(
    client: GitHubClient,
    repo: str,
    number: int,
    body: str,
    *,
    mode: CommentMode = "edit",
    bot_login: str | None = None,
    known_id: int | None = None,
) -> Published:
    """Create, edit or leave the PR's cpci comment, as `mode` says."""
    if mode not in COMMENT_MODES:
        raise ValueError(f"comment mode must be one of {', '.join(COMMENT_MODES)}, got {mode!r}")
    if mode == "off":
        return Published("skipped", known_id)
    existing = find_comment(
        client.list_issue_comments(repo, number), bot_login=bot_login, known_id=known_id
    )
    turned_red = (
        existing is not None
        and gate_recorded_in(existing.body) in ("success", "neutral")
        and gate_recorded_in(body) == "failure"
    )
    if existing is None or (mode == "new-on-regression" and turned_red):
        return Published("created", client.create_issue_comment(repo, number, body).id)
    if existing.body == body:
        return Published("unchanged", existing.id)
    return Published("updated", client.update_issue_comment(repo, existing.id, body).id)


_CONCLUSION = {"success": "success", "failure": "failure", "neutral": "neutral"}
#: A commit status has no "neutral": it passes; anything unknown fails.
_STATUS_OF_CONCLUSION: dict[str, StatusState] = {
    "success": "success",
    "neutral": "success",
    "pending": "pending",
}


def check_run_fields(
    report: PullRequestReport | None,
    consistency: ConsistencyResult | None,
    *,
    head_sha: str,
    fail_on: FailOn = "new-failures",
    details_url: str | None = None,
) -> dict[str, Any]:
    """The body of a create/update check-run call: status, conclusion and output."""
    verdict = gate(report, consistency, fail_on)
    title, summary = _title_and_summary(report, consistency, verdict, fail_on)
    fields: dict[str, Any] = {
        "name": CHECK_NAME,
        "head_sha": head_sha,
        "output": {
            "title": title,
            "summary": summary[:OUTPUT_LIMIT],
            "text": _json_text(report, consistency),
        },
    }
    if verdict == "pending":
        fields["status"] = "in_progress"
    else:
        fields["status"] = "completed"
        fields["conclusion"] = _CONCLUSION[verdict]
    if details_url:
        fields["details_url"] = details_url
    return fields


def _title_and_summary(
    report: PullRequestReport | None,
    consistency: ConsistencyResult | None,
    verdict: Gate,
    fail_on: FailOn,
) -> tuple[str, str]:
    findings = [f for f in consistency.findings if f.level != "note"] if consistency else []
    rules = f"; {len(findings)} file-consistency finding(s)" if findings else ""
    if report is None:
        return "waiting for results" + rules, "No cpci results were uploaded for this commit yet."
    if report.storms and verdict != "pending":
        title_storm = f"; storm on {len(report.storms)} shard(s)"
    else:
        title_storm = ""
    title = {
        "pending": f"waiting: {report.shards.text}",
        "failure": gating_text(report) or "failures (none new)",
        "neutral": "no new failures; see known issues",
        "success": "all configs passed",
    }[verdict]
    storm = storm_line(report)
    summary = (
        storm + "\n\n" if storm else ""
    ) + f"{report.summary}\n\nGating: `fail-on: {fail_on}`."
    return title + title_storm + rules, summary


def _json_text(report: PullRequestReport | None, consistency: ConsistencyResult | None) -> str:
    """The machine-readable report, trimmed of evidence and then of lists until it fits."""
    data: dict[str, Any] = {
        "report": report.model_dump(mode="json") if report else None,
        "consistency": consistency.model_dump(mode="json") if consistency else None,
    }
    for trim in (_keep, _drop_evidence, _counts_only):
        text = "```json\n" + json.dumps(trim(data), separators=(",", ":")) + "\n```"
        if len(text) <= OUTPUT_LIMIT:
            return text
    return "report too large for the check run: read it from the cpci service"


def _keep(data: dict[str, Any]) -> dict[str, Any]:
    return data


def _drop_evidence(data: dict[str, Any]) -> dict[str, Any]:
    """The report without its flakiness evidence, the findings without their hunks and patches
    (the comment shows them)."""
    report, consistency = data["report"], data["consistency"]
    if consistency is not None:
        findings = [
            {**f, "drifts": [{**d, "hunk": "", "patch": None} for d in f.get("drifts", [])]}
            for f in consistency["findings"]
        ]
        data = {**data, "consistency": {**consistency, "findings": findings}}
    if report is None:
        return data
    sections = [v.field for v in VERDICTS if v.field]
    slim = {**report}
    for name in sections:
        slim[name] = [{**v, "flakiness": None} for v in report.get(name, [])]
    return {**data, "report": slim}


def _counts_only(data: dict[str, Any]) -> dict[str, Any]:
    report = data["report"]
    if report is None:
        return data
    keep = ("repository", "pull_request", "head_commit", "status", "summary", "counts", "shards")
    return {**data, "report": {k: report[k] for k in keep}}


def publish_check(
    client: GitHubClient,
    repo: str,
    fields: dict[str, Any],
    *,
    known_id: int | None = None,
) -> int | None:
    """Create or update the check run; where the token may not (a PAT), set a commit status.

    Returns the check run's id (None when a status was set instead).
    """
    try:
        if known_id is not None:
            update = {k: v for k, v in fields.items() if k != "head_sha"}
            return client.update_check_run(repo, known_id, update).id
        return client.create_check_run(repo, fields).id
    except PermissionDenied:
        state = fields.get("conclusion") or "pending"
        client.create_status(
            repo,
            fields["head_sha"],
            state=_STATUS_OF_CONCLUSION.get(state, "failure"),
            context=CHECK_NAME,
            description=str(fields["output"]["title"])[:140],
            target_url=fields.get("details_url"),
        )
        return None
