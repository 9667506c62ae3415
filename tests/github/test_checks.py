"""The gate per `fail-on` mode, and the check run as GitHub receives it (contract-checked)."""

from __future__ import annotations

import json

import pytest

from cpci.github.client import GitHubClient
from cpci.github.consistency import evaluate
from cpci.github.gate import gate
from cpci.github.models import ChangedFile
from cpci.github.publish import check_run_fields, publish_check
from cpci.github.rules import parse_rules
from tests.builders import HEAD, report, verdict
from tests.github.fake_github import FakeGitHub

NEW = report(new_failures=[verdict("a")])
INHERITED = report(broken_at_base=[verdict("b", "broken_at_base")])
BROKEN_RULE = evaluate(
    parse_rules("consistency:\n  - {name: r, paths: [x, y], severity: fail}\n"),
    [ChangedFile(filename="x", status="modified")],
)


@pytest.mark.parametrize(
    ("mode", "new", "inherited", "clean", "rule"),
    [
        ("new-failures", "failure", "neutral", "success", "failure"),
        ("any-failure", "failure", "failure", "success", "failure"),
        ("never", "neutral", "neutral", "success", "neutral"),
    ],
)
def test_gate_per_mode(mode: str, new: str, inherited: str, clean: str, rule: str) -> None:
    assert gate(NEW, None, mode) == new  # type: ignore[arg-type]
    assert gate(INHERITED, None, mode) == inherited  # type: ignore[arg-type]
    assert gate(report(), None, mode) == clean  # type: ignore[arg-type]
    assert gate(report(), BROKEN_RULE, mode) == rule  # type: ignore[arg-type]


def test_no_verdict_while_shards_are_missing() -> None:
    assert gate(report(pending=True, new_failures=[verdict("a")]), None) == "pending"
    with pytest.raises(ValueError, match="fail-on must be one of"):
        gate(NEW, None, "sometimes")  # type: ignore[arg-type]


def test_check_run_goes_from_in_progress_to_failure(fake: FakeGitHub, client: GitHubClient) -> None:
    pending = check_run_fields(report(pending=True), None, head_sha=HEAD)
    check_id = publish_check(client, "acme/attn", pending)
    assert check_id is not None  # an App's token may create check runs
    assert fake.check_runs[check_id]["status"] == "in_progress"
    done = check_run_fields(NEW, None, head_sha=HEAD, details_url="https://cpci.example.com/x")
    assert publish_check(client, "acme/attn", done, known_id=check_id) == check_id
    check = fake.check_runs[check_id]
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert check["output"]["title"] == "1 new failure(s)"
    text = check["output"]["text"]
    data = json.loads(text.removeprefix("```json\n").removesuffix("\n```"))
    assert data["report"]["new_failures"][0]["config"].endswith("test_attn[a]@2")


def test_huge_report_json_is_trimmed_to_the_output_limit() -> None:
    many = [verdict(f"c{i}" + "x" * 300) for i in range(3000)]
    fields = check_run_fields(report(new_failures=many), None, head_sha=HEAD)
    assert len(fields["output"]["text"]) <= 65_535
    assert '"counts"' in fields["output"]["text"]


def test_a_token_that_may_not_create_check_runs_sets_a_status(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.fail(
        "POST", "/check-runs$", 403, message="Resource not accessible by personal access token"
    )
    assert publish_check(client, "acme/attn", check_run_fields(NEW, None, head_sha=HEAD)) is None
    [status] = fake.statuses
    assert (status["state"], status["context"], status["sha"]) == ("failure", "cpci", HEAD)
