"""Whose acknowledgements count: only those of people who may write to the repository.

A `cpci-ack:RULE` label waives any rule, and so does a `cpci-ack: RULE` line in an approving
review, so both must come from someone whose permission level (GitHub's
repos/get-collaborator-permission-level) is `admin` or `write`: adding a label needs only
triage, and a review's `author_association` MEMBER says nothing about this repository.

Who added a label is read from the PR's events (issues/list-events: the last `labeled` event
of that label), which also covers labels added while the service was away, and, for the
delivery at hand, from the `labeled` webhook's `sender` (the events list may not show that
event yet). When both are known, both must be writers; a label whose adder is not known at all
counts for nothing. An ack that does not count says why in its finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpci.github.client import GitHubClient
from cpci.github.consistency import (
    Acknowledgements,
    ack_label_rule,
    acked_rules,
    acknowledgements,
)
from cpci.github.errors import PermissionDenied
from cpci.github.models import WRITE_PERMISSIONS, PullRequest


def label_senders(event: str, payload: Mapping[str, Any]) -> dict[str, str]:
    """{label: who added it} for a `pull_request` `labeled` delivery; {} for any other."""
    if event != "pull_request" or payload.get("action") != "labeled":
        return {}
    label, sender = payload.get("label") or {}, payload.get("sender") or {}
    if not label.get("name") or not sender.get("login"):
        return {}
    return {str(label["name"]): str(sender["login"])}


class _Writers:
    """Who may write to one repository, asked of GitHub once per login."""

    def __init__(self, client: GitHubClient, repo: str) -> None:
        self._client, self._repo = client, repo
        self._known: dict[str, str | None] = {}

    def why_not(self, login: str) -> str | None:
        """None when `login` may write; else why their ack does not count."""
        if login not in self._known:
            try:
                permission = self._client.permission(self._repo, login)
            except PermissionDenied as exc:
                self._known[login] = f"{login}'s permission could not be read: {exc}"
            else:
                self._known[login] = (
                    None
                    if permission in WRITE_PERMISSIONS
                    else f"{login} has {permission} permission, not write"
                )
        return self._known[login]


def pull_acknowledgements(
    client: GitHubClient,
    repo: str,
    pull: PullRequest,
    *,
    labelled_by: Mapping[str, str] | None = None,
) -> Acknowledgements:
    """The PR's acknowledgements that count: ack labels added by writers, ack lines in writers'
    approving reviews, and the body's lines (the author's, for `warn` rules only)."""
    writers = _Writers(client, repo)
    senders = dict(labelled_by or {})
    unvouched: dict[str, list[str]] = {}
    ack_labels = [label for label in pull.labels if ack_label_rule(label) is not None]
    last: dict[str, str] = {}  # label -> the actor of its last `labeled` event
    if ack_labels:
        for event in client.list_issue_events(repo, pull.number):
            if event.event == "labeled" and event.label is not None and event.actor_login:
                last[event.label] = event.actor_login
    labels = []
    for label in ack_labels:
        adders = sorted({who for who in (last.get(label), senders.get(label)) if who})
        why = [w for w in map(writers.why_not, adders) if w is not None]
        if adders and not why:
            labels.append(label)
            continue
        because = "; ".join(why) if adders else "no event says who added it"
        unvouched.setdefault(ack_label_rule(label) or "", []).append(
            f"the label `{label}` does not count: {because}"
        )
    approvals = []
    for review in client.list_pull_reviews(repo, pull.number):
        rules = acked_rules(review.body)
        if not rules or not review.approves(pull.author) or review.user_login is None:
            continue
        why_not = writers.why_not(review.user_login)
        if why_not is None:
            approvals.append(review.body)
            continue
        for rule in rules:
            unvouched.setdefault(rule, []).append(f"the approving review does not count: {why_not}")
    notes = {rule: "; ".join(why) for rule, why in unvouched.items()}
    return acknowledgements(labels, pull.body, approvals, notes)
