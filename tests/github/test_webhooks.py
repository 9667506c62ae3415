"""`POST /github/webhook` with GitHub's real payloads (shared/reference/webhooks), signed right
and wrong, against a service on a real SQLite database and the contract-checked fake GitHub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openapi_schema_validator import OAS30Validator
from sqlmodel import Session, select

from cpci.github import markdown as md
from cpci.github.comment import gate_recorded_in
from cpci.github.webhooks import sign, signature_ok
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.crud.github import load_pull_state
from cpci.server.models import Repository, WebhookDelivery
from tests.github import pairs
from tests.github.contract import require_reference, webhook_schema
from tests.github.fake_github import FakeGitHub
from tests.github.gfm import fenced_blocks
from tests.github.service_bot import (
    EXAMPLE_RULES,
    HELLO,
    OCTO,
    PR_BASE,
    PR_HEAD,
    RUN_HEAD,
    SECRET,
    V1,
    V2,
    Bot,
    running_bot,
)


def test_github_signs_as_documented() -> None:
    """GitHub's documented example: this secret and body give this signature."""
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(SECRET, b"Hello, World!") == expected
    assert signature_ok(SECRET, b"Hello, World!", expected)
    assert not signature_ok(SECRET, b"Hello, World?", expected)
    assert not signature_ok(SECRET, b"Hello, World!", expected.replace("sha256=", "sha1="))
    assert not signature_ok(SECRET, b"Hello, World!", None)


@pytest.mark.parametrize(
    ("payload", "schema"),
    [
        ("pull_request.opened.payload.json", "webhook-pull-request-opened"),
        (
            "workflow_run.completed.with-pull-requests.payload.json",
            "webhook-workflow-run-completed",
        ),
    ],
)
def test_replayed_payloads_follow_githubs_schema(payload: str, schema: str) -> None:
    data = json.loads((require_reference() / "webhooks" / payload).read_text())
    OAS30Validator(webhook_schema(schema)).validate(data)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    require_reference()
    engine = create_db_engine(f"sqlite:///{tmp_path / 'cpci.db'}")
    upgrade(engine)
    with running_bot(engine, FakeGitHub()) as running:
        yield running
    engine.dispose()


def test_pull_request_opened_checks_consistency_and_comments(bot: Bot) -> None:
    bot.fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE, files=[("modified", V2)])
    bot.fake.contents[(HELLO, ".github/cpci.yml", PR_BASE)] = EXAMPLE_RULES
    response = bot.deliver("pull_request.opened.payload.json", "d-1")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    [comment] = bot.fake.comments[(HELLO, 2)]
    assert "no results uploaded yet, 1 file-consistency warning(s)" in comment["body"]
    assert "`dtensor-policy-worker`" in comment["body"]
    [check] = bot.fake.check_runs.values()
    assert (check["name"], check["status"], check["head_sha"]) == ("cpci", "in_progress", PR_HEAD)
    assert bot.deliveries() == [("d-1", "done")]
    # synchronize with the same head: the same comment and check run, nothing new written
    writes = len(bot.fake.writes())
    assert bot.deliver("pull_request.synchronize.payload.json", "d-2").status_code == 202
    assert len(bot.fake.comments[(HELLO, 2)]) == 1
    assert [w for w in bot.fake.writes()[writes:] if "comments" in w[1]] == []


def test_bad_or_missing_signature_is_401_and_stores_nothing(bot: Bot) -> None:
    for signature in (None, "sha256=" + "0" * 64, "garbage"):
        response = bot.deliver("pull_request.opened.payload.json", "d-bad", signature=signature)
        assert response.status_code == 401
        assert "CPCI_GITHUB_WEBHOOK_SECRET" in response.json()["detail"]
    assert bot.deliveries() == []
    assert bot.fake.calls == []


def test_a_redelivery_is_not_acted_on_twice(bot: Bot) -> None:
    bot.fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    assert bot.deliver("pull_request.opened.payload.json", "d-1").status_code == 202
    calls = len(bot.fake.calls)
    again = bot.deliver("pull_request.opened.payload.json", "d-1")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert len(bot.fake.calls) == calls


@pytest.mark.parametrize(
    "name",
    [
        "check_run.completed.payload.json",
        "issue_comment.created.payload.json",
        "pull_request.closed.payload.json",
        "check_suite.completed.payload.json",
    ],
)
def test_other_events_are_accepted_and_ignored(bot: Bot, name: str) -> None:
    response = bot.deliver(name, f"d-{name}")
    assert (response.status_code, response.json()["status"]) == (202, "ignored")
    assert bot.fake.calls == []
    assert bot.deliveries() == [(f"d-{name}", "ignored")]


@pytest.mark.parametrize(
    "payload",
    [
        "workflow_run.completed.with-pull-requests.payload.json",
        "workflow_run.completed.payload.json",
    ],
)
def test_workflow_run_completed_finalises_the_verdict(bot: Bot, payload: str) -> None:
    """With the PR listed in the payload, or (a fork's run lists none) found by its head commit.
    The base runs on `master`: the payload's repository's default branch, so the trusted one."""
    bot.upload(OCTO, PR_BASE, {"p2p": "passed", "a2a": "passed"}, branch="master")
    bot.upload(
        OCTO, RUN_HEAD, {"p2p": "passed", "a2a": "failed"}, pull_request=2, base_commit=PR_BASE
    )
    bot.fake.add_pull(OCTO, 2, head_sha=RUN_HEAD, base_sha=PR_BASE)
    assert bot.deliver(payload, "d-run").status_code == 202
    [comment] = bot.fake.comments[(OCTO, 2)]
    body = comment["body"]
    assert gate_recorded_in(body) == "failure"
    assert "## ❌ cpci: 1 new failure(s)" in body
    assert "**2 configs, 2 runs** · 1/1 shards reported" in body
    assert "@\u2060octocat" not in body
    assert "`@octocat max err 0.3`" in body
    [check] = bot.fake.check_runs.values()
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert bot.deliveries() == [("d-run", "done")]
    with Session(bot.engine) as session:
        repo = session.exec(select(Repository).where(Repository.name == OCTO)).one()
    assert repo.default_branch == "master"


def test_github_failure_is_recorded_on_the_delivery(bot: Bot) -> None:
    bot.fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    bot.fake.fail("POST", "/comments$", 403, message="Resource not accessible by integration")
    assert bot.deliver("pull_request.opened.payload.json", "d-1").status_code == 202
    [(_delivery, status)] = bot.deliveries()
    assert status == "failed"
    with Session(bot.engine) as session:
        row = session.exec(select(WebhookDelivery)).one()
    assert "fork" in (row.detail or "")


def test_a_payload_missing_its_fields_fails_the_delivery_not_the_service(bot: Bot) -> None:
    body = json.dumps({"action": "opened", "number": 2}).encode()
    response = bot.deliver("", "d-x", event="pull_request", body=body)
    assert response.status_code == 202
    assert bot.deliveries() == [("d-x", "failed")]


def _pull_event(action: str, **extra: Any) -> bytes:
    payload = json.loads(
        (require_reference() / "webhooks" / "pull_request.opened.payload.json").read_text()
    )
    payload.update(action=action, **extra)
    return json.dumps(payload).encode()


def _levels(bot: Bot) -> list[tuple[str, str]]:
    with Session(bot.engine) as session:
        pulled = load_pull_state(session=session, repository=HELLO, number=2)
    assert pulled is not None
    assert pulled.consistency is not None
    return [(f.rule, f.level) for f in pulled.consistency.findings]


def test_acks_by_label_or_body_edit_are_seen_without_a_push(bot: Bot) -> None:
    """The author's body line cannot waive a fail rule; a maintainer's label can, and `labeled`,
    `unlabeled` and `edited` events re-evaluate at once."""
    rules = (
        f"consistency:\n  - {{name: strict, paths: [{V1}, {V2}], severity: fail}}\n"
        f"  - {{name: soft, paths: [{V2}, docs/workers.md]}}\n"
    )
    bot.fake.contents[(HELLO, ".github/cpci.yml", PR_BASE)] = rules
    bot.fake.grant(HELLO, "Codertocat", "admin")  # the payloads' sender

    def pull(body: str) -> None:
        bot.fake.add_pull(
            HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE, body=body, files=[("modified", V2)]
        )

    pull("cpci-ack: strict")
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("opened"))
    assert _levels(bot) == [("strict", "fail"), ("soft", "warn")]
    both = "cpci-ack: strict\ncpci-ack: soft"
    pull(both)
    bot.deliver("", "d-2", event="pull_request", body=_pull_event("edited", changes={}))
    assert _levels(bot) == [("strict", "fail"), ("soft", "note")]
    label = bot.fake.label(HELLO, 2, "cpci-ack:strict", by="Codertocat")
    bot.deliver("", "d-3", event="pull_request", body=_pull_event("labeled", label=label))
    assert _levels(bot) == [("strict", "note"), ("soft", "note")]
    [check] = bot.fake.check_runs.values()
    assert check["conclusion"] != "failure"
    bot.fake.unlabel(HELLO, 2, "cpci-ack:strict", by="Codertocat")
    bot.deliver("", "d-4", event="pull_request", body=_pull_event("unlabeled", label=label))
    assert _levels(bot) == [("strict", "fail"), ("soft", "note")]
    assert [d for d in bot.deliveries() if d[1] != "done"] == []


def _strict_rule_on_pr_2(bot: Bot) -> None:
    rules = f"consistency:\n  - {{name: strict, paths: [{V1}, {V2}], severity: fail}}\n"
    bot.fake.contents[(HELLO, ".github/cpci.yml", PR_BASE)] = rules
    bot.fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE, files=[("modified", V2)])


def _message(bot: Bot) -> str:
    with Session(bot.engine) as session:
        pulled = load_pull_state(session=session, repository=HELLO, number=2)
    assert pulled is not None
    assert pulled.consistency is not None
    return pulled.consistency.findings[0].message


def test_an_ack_label_counts_only_when_its_sender_may_write(bot: Bot) -> None:
    """The `labeled` delivery's sender must have write permission: triage (which may add
    labels, and reads as `read`) is not enough, and the finding says why."""
    _strict_rule_on_pr_2(bot)
    bot.fake.grant(HELLO, "triager", "read")
    label = bot.fake.label(HELLO, 2, "cpci-ack:strict", by="triager")
    labelled = json.loads(_pull_event("labeled", label=label))
    labelled["sender"] = {**labelled["sender"], "login": "triager"}
    bot.deliver("", "d-1", event="pull_request", body=json.dumps(labelled).encode())
    assert _levels(bot) == [("strict", "fail")]
    assert "the label `cpci-ack:strict` does not count: triager has read permission" in (
        _message(bot)
    )
    # A writer's label counts, even one the events list does not show yet: the sender says who.
    bot.fake.grant(HELLO, "maintainer", "write")
    bot.fake.add_pull(
        HELLO,
        2,
        head_sha=PR_HEAD,
        base_sha=PR_BASE,
        labels=("cpci-ack:strict",),
        files=[("modified", V2)],
    )
    bot.fake.events.clear()
    labelled["sender"] = {**labelled["sender"], "login": "maintainer"}
    bot.deliver("", "d-2", event="pull_request", body=json.dumps(labelled).encode())
    assert _levels(bot) == [("strict", "note")]
    assert [d for d in bot.deliveries() if d[1] != "done"] == []


def test_a_label_added_while_the_service_was_away_is_checked_in_the_prs_events(bot: Bot) -> None:
    """No `labeled` delivery came (the service was down); the next delivery (each a new push:
    the same body twice would be a replay) reads who added each ack label from
    issues/list-events: the last one to add it must be a writer."""
    _strict_rule_on_pr_2(bot)
    bot.fake.grant(HELLO, "maintainer", "write")
    bot.fake.label(HELLO, 2, "cpci-ack:strict", by="drive-by")
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("synchronize", after="0" * 40))
    assert _levels(bot) == [("strict", "fail")]
    assert "drive-by has read permission, not write" in _message(bot)
    bot.fake.unlabel(HELLO, 2, "cpci-ack:strict", by="maintainer")
    bot.fake.label(HELLO, 2, "cpci-ack:strict", by="maintainer")
    bot.deliver("", "d-2", event="pull_request", body=_pull_event("synchronize", after="1" * 40))
    assert _levels(bot) == [("strict", "note")]
    # A label on the PR that no event accounts for counts for nothing.
    bot.fake.events.clear()
    bot.deliver("", "d-3", event="pull_request", body=_pull_event("synchronize", after="2" * 40))
    assert _levels(bot) == [("strict", "fail")]
    assert "no event says who added it" in _message(bot)


def test_a_maintainers_approving_review_acknowledges_at_once(bot: Bot) -> None:
    """An approval with a `cpci-ack:` line counts when its author may write: a MEMBER of the
    organisation with read permission does not."""
    _strict_rule_on_pr_2(bot)
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("opened"))
    assert _levels(bot) == [("strict", "fail")]
    text = "Both workers are fine.\ncpci-ack: strict"
    _approve(bot, "d-2", "drive-by", "NONE", text)  # anyone may approve a public PR: no ack
    assert _levels(bot) == [("strict", "fail")]
    bot.fake.grant(HELLO, "member", "read")
    _approve(bot, "d-3", "member", "MEMBER", text)  # a member of the org, no write here
    assert _levels(bot) == [("strict", "fail")]
    assert "the approving review does not count: member has read permission" in _message(bot)
    bot.fake.grant(HELLO, "maintainer", "write")
    _approve(bot, "d-4", "maintainer", "COLLABORATOR", text)
    assert _levels(bot) == [("strict", "note")]
    assert [d for d in bot.deliveries() if d[1] != "done"] == []


def _approve(bot: Bot, delivery: str, login: str, association: str, text: str) -> None:
    """`login` approves PR 2 with `text`, and GitHub delivers the review."""
    bot.fake.add_review(HELLO, 2, login=login, association=association, state="APPROVED", body=text)
    [review] = bot.fake.reviews[(HELLO, 2)][-1:]
    opened = json.loads(_pull_event("opened"))
    event = {
        "action": "submitted",
        "review": review,
        "pull_request": opened["pull_request"],
        "repository": opened["repository"],
        "sender": opened["sender"],
    }
    bot.deliver("", delivery, event="pull_request_review", body=json.dumps(event).encode())


def _pair_on_pr_2(bot: Bot, v2_head: str, *, title: str = "feat: workers") -> None:
    """The workers' rule at the PR's base, both workers at its base and head (v2 edited)."""
    bot.fake.contents[(HELLO, ".github/cpci.yml", PR_BASE)] = pairs.RULES
    for sha, v2 in ((PR_BASE, pairs.WORKER_V2), (PR_HEAD, v2_head)):
        bot.fake.contents[(HELLO, pairs.V1, sha)] = pairs.WORKER_V1
        bot.fake.contents[(HELLO, pairs.V2, sha)] = v2
    files = [("modified", pairs.V2)]
    bot.fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE, title=title, files=files)


def test_a_pair_of_python_files_is_checked_function_by_function(bot: Bot, tmp_path: Path) -> None:
    """Both workers come from the contents API at the PR's base and head: the comment names
    the function to port and its twin, with links to their lines at the head, the hunk and a
    patch that applies; a fix fails the check; a writer's approval acknowledges the one
    function."""
    fixed = pairs.edit(pairs.WORKER_V2, *pairs.EMPTY_BATCH)
    _pair_on_pr_2(bot, fixed, title="fix: empty batches")
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("opened"))
    [comment] = bot.fake.comments[(HELLO, 2)]
    body = comment["body"]
    assert f"https://github.com/{HELLO}/blob/{PR_HEAD}/{pairs.V2}#L13-L19" in body
    assert f"https://github.com/{HELLO}/blob/{PR_HEAD}/{pairs.V1}#L12-L18" in body
    assert ("GET", f"/repos/{HELLO}/contents/{pairs.V2}") in bot.fake.calls
    _hunk, patch = fenced_blocks(body, "diff")
    after = pairs.git_apply(tmp_path, {pairs.V1: pairs.WORKER_V1}, patch)
    assert after[pairs.V1] == pairs.edit(pairs.WORKER_V1, *pairs.EMPTY_BATCH)
    assert _levels(bot) == [("workers", "fail")]
    [check] = bot.fake.check_runs.values()
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    bot.fake.grant(HELLO, "maintainer", "write")
    _approve(bot, "d-2", "maintainer", "COLLABORATOR", "cpci-ack: workers:train")
    assert _levels(bot) == [("workers", "note")]
    assert check["conclusion"] != "failure"
    assert [d for d in bot.deliveries() if d[1] != "done"] == []


def test_a_pair_file_over_the_bound_is_checked_file_by_file_and_says_so(bot: Bot) -> None:
    """Over GitHub's 1 MB (the default bound), the contents API sends no content: file level."""
    large = pairs.WORKER_V2 + "#" * 1_000_000 + "\n"
    _pair_on_pr_2(bot, large)
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("opened"))
    assert _levels(bot) == [("workers", "warn")]
    [comment] = bot.fake.comments[(HELLO, 2)]
    size = len(large.encode())
    said = f"`{pairs.V2}` is {size:,} bytes at head, over the 1,000,000-byte bound"
    assert f"(checked file by file: {md.text(said)})" in comment["body"]


def test_the_prs_own_diff_is_its_base_even_when_the_base_branch_moved_on(bot: Bot) -> None:
    """`base.sha` is the base branch's tip, which here gained a comment in v2's `train` and a
    new method after the PR branched: read there, the PR would seem to remove both. The file
    list's patch is the PR's diff from the merge base, so the PR's change is its fix alone."""
    merge_base = "a" * 40
    fixed = pairs.edit(pairs.WORKER_V2, *pairs.EMPTY_BATCH)
    _pair_on_pr_2(bot, fixed)
    moved = pairs.edit(
        pairs.WORKER_V2, "        losses = []\n", "        # a comment\n        losses = []\n"
    )
    moved = pairs.edit(
        moved, "    def only_in_v2", "    def warmup(self):\n        pass\n\n    def only_in_v2"
    )
    bot.fake.contents[(HELLO, pairs.V2, PR_BASE)] = moved
    bot.fake.contents[(HELLO, pairs.V2, merge_base)] = pairs.WORKER_V2
    files = [("modified", pairs.V2)]
    bot.fake.add_pull(
        HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE, files=files, merge_base=merge_base
    )
    bot.deliver("", "d-1", event="pull_request", body=_pull_event("opened"))
    with Session(bot.engine) as session:
        pulled = load_pull_state(session=session, repository=HELLO, number=2)
    assert pulled is not None
    assert pulled.consistency is not None
    [finding] = pulled.consistency.findings
    [drift] = finding.drifts
    assert drift.function.qualname == "DTensorPolicyWorkerV2.train"
    assert "a comment" not in drift.hunk
    assert finding.one_sided == []  # `warmup` is the base branch's, not the PR's
    reads = [c for c in bot.fake.calls if c[1].endswith(pairs.V2)]
    assert reads == [("GET", f"/repos/{HELLO}/contents/{pairs.V2}")]  # the head: one read
