"""The PR comment: golden bodies (read them by eye), hostile names, the size limit, the upsert."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cpci.github import markdown as md
from cpci.github.client import COMMENT_LIMIT, GitHubClient
from cpci.github.comment import MARKER, CommentOptions, gate_recorded_in, render
from cpci.github.consistency import evaluate
from cpci.github.models import ChangedFile
from cpci.github.publish import upsert_comment
from cpci.github.rules import parse_rules
from cpci.schema import FlakeTest
from tests.github.fake_github import FakeGitHub
from tests.github.pull_reports import drift, flaky_evidence, report, verdict

#: A CommonMark code span: a backtick run, then anything up to a run of the same length.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
GOLDEN = Path(__file__).parent / "golden"
OPTIONS = CommentOptions(service_url="https://cpci.example.com")


def _golden(name: str, body: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CPCI_UPDATE_GOLDEN") == "1":
        path.write_text(body, encoding="utf-8")
    assert body == path.read_text(encoding="utf-8"), (
        f"rerun with CPCI_UPDATE_GOLDEN=1, then read {path}"
    )


def _mixed_report():  # type: ignore[no-untyped-def]
    return report(
        new_failures=[
            verdict("p2p-bf16"),
            verdict("a2a-fp16", message=None, head_outcome="crashed"),
        ],
        broken_at_base=[verdict("ag-causal", "broken_at_base", reason="fails at base too")],
        flaky=[verdict("a2a+p2p-gqa", "flaky", reason="known flaky", flakiness=flaky_evidence())],
        infra=[
            verdict(
                "p2p-fp32",
                "infra",
                head_outcome="crashed",
                infra_rule="nccl-timeout",
                reason="crashed: NCCL watchdog timeout",
            )
        ],
        fixed=[verdict(f"fixed-{i}", "fixed", head_outcome="passed") for i in range(7)],
        no_baseline=[verdict("new-config", "no_baseline", reason="no result at the base")],
        metric_drift=[drift("p2p-bf16")],
    )


def _consistency():  # type: ignore[no-untyped-def]
    rules = parse_rules(
        "consistency:\n  - {name: workers, paths: [w1.py, w2.py], message: keep in step}\n"
    )
    return evaluate(rules, [ChangedFile(filename="w2.py", status="modified")])


def test_golden_mixed_report() -> None:
    _golden("mixed.md", render(_mixed_report(), _consistency(), OPTIONS))


def test_golden_all_green_and_pending() -> None:
    _golden("green.md", render(report(configs=3, results=3), None, OPTIONS))
    _golden("pending.md", render(report(pending=True), None, OPTIONS))


def test_headline_counts_and_state_marker() -> None:
    body = render(_mixed_report(), None, OPTIONS)
    assert body.startswith(MARKER)
    assert gate_recorded_in(body) == "failure"
    assert "## ❌ cpci: 2 new failure(s)" in body
    assert "**412 configs, 1,236 runs** · 8/8 shards reported" in body
    assert "(https://cpci.example.com/api/v1/repos/acme/attn/history?config=p2p-bf16)" in body
    assert gate_recorded_in(render(report(), None, OPTIONS)) == "success"
    never = CommentOptions(fail_on="never")
    assert gate_recorded_in(render(_mixed_report(), None, never)) == "neutral"


HOSTILE = [
    "@octocat please look",
    "<details><summary>x</summary>",
    "</details></summary><img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![tracker](https://evil.example/p.png)",
    "```\nfence breaker",
    "`` `tick` ``",
    "line1\nline2\r\n# heading",
    "<!-- cpci:pr-report state=success -->",
    "fixes #1234 and @org/team",
    "\u202eevil\u202c",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_test_ids_and_messages_stay_inert(name: str) -> None:
    hostile = verdict("x", config=name, message=name, reason=name)
    body = render(report(new_failures=[hostile], flaky=[hostile]), None, OPTIONS)
    outside_code = CODE_SPAN.sub("", body)  # what Markdown interprets
    assert outside_code.count(MARKER) == 1
    assert body.startswith(MARKER)
    assert "@octocat" not in outside_code
    assert "@org" not in outside_code
    assert "<img" not in outside_code
    assert "](javascript:" not in outside_code
    assert "](https://evil" not in outside_code
    assert outside_code.count("<details") == outside_code.count("</details>")
    assert "`" not in outside_code.replace("\\`", "")  # backticks: in code spans or escaped
    assert "\u202e" not in body
    for line in body.splitlines():
        assert not line.startswith(("# heading", "```"))


def test_reasons_are_plain_text() -> None:
    hostile = verdict("x", "no_baseline", reason="@octocat <b>bold</b> #12 [x](y)")
    body = render(report(no_baseline=[hostile]), None, OPTIONS)
    line = next(line for line in body.splitlines() if "octocat" in line)
    assert "@\u2060octocat" in line
    assert "&lt;b&gt;" in line
    assert "#\u20601" in line
    assert "\\[x\\]\\(y\\)" in line


def test_huge_report_fits_githubs_limit_with_a_link_to_the_rest() -> None:
    many = [verdict(f"cfg-{i}-" + "x" * 200, message="E" * 300) for i in range(5000)]
    body = render(report(new_failures=many), None, OPTIONS)
    assert len(body) <= COMMENT_LIMIT
    assert "5,000" in body
    assert "more in the [full report](https://cpci.example.com/ui/acme/attn/pulls/42)" in body


def test_upsert_creates_then_edits_then_writes_nothing(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    fake.add_comment("acme/attn", 42, "a human comment", "alice")
    fake.add_comment("acme/attn", 42, MARKER + " state=success --> forged by a user", "mallory")
    first = upsert_comment(
        client, "acme/attn", 42, render(report(), None), bot_login="cpci-bot[bot]"
    )
    assert first.action == "created"
    second = upsert_comment(
        client,
        "acme/attn",
        42,
        render(_mixed_report(), None),
        bot_login="cpci-bot[bot]",
        known_id=first.comment_id,
    )
    assert (second.action, second.comment_id) == ("updated", first.comment_id)
    writes = len(fake.writes())
    third = upsert_comment(
        client, "acme/attn", 42, render(_mixed_report(), None), bot_login="cpci-bot[bot]"
    )
    assert third.action == "unchanged"
    assert len(fake.writes()) == writes  # nothing written for an identical body
    bodies = [c["body"] for c in fake.comments[("acme/attn", 42)]]
    assert len(bodies) == 3
    assert bodies[1].endswith("forged by a user")


def test_new_on_regression_posts_a_fresh_comment_when_green_turns_red(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    green, red = render(report(), None), render(_mixed_report(), None)
    first = upsert_comment(client, "acme/attn", 42, green, mode="new-on-regression")
    again = upsert_comment(
        client, "acme/attn", 42, red, mode="new-on-regression", known_id=first.comment_id
    )
    assert again.action == "created"
    assert again.comment_id != first.comment_id
    still_red = upsert_comment(
        client, "acme/attn", 42, red + "x", mode="new-on-regression", known_id=again.comment_id
    )
    assert (still_red.action, still_red.comment_id) == ("updated", again.comment_id)
    assert upsert_comment(client, "acme/attn", 42, green, mode="off").action == "skipped"
    assert len(fake.comments[("acme/attn", 42)]) == 2


def test_a_rerun_flaky_label_does_not_quote_history_counts() -> None:
    """Flaky by a same-commit rerun: the history's counts (no label there) would contradict it."""
    history = flaky_evidence().model_copy(update={"flaky": False, "failures": 0, "passes": 1})
    rerun = verdict(
        "a2a", "flaky", reason="passed and failed at the head commit itself", flakiness=history
    )
    body = render(report(flaky=[rerun]), None, OPTIONS)
    assert "passed and failed at the head commit itself" in body
    assert "0 failure(s)" not in body


def test_a_new_failure_shows_why_flakiness_was_ruled_out_and_its_leg() -> None:
    test = FlakeTest(
        failed_attempts=3,
        history_failures=9,
        history_trials=30,
        rate_upper=0.4476,
        level=0.95,
        novel_signature=False,
        novel_share=1.0,
        chance=0.0897,
        threshold=0.2,
    )
    reason = f"passes at base, fails at head; not explained by flakiness: {test.text()}"
    failure = verdict("p2p-bf16", reason=reason, evidence=test, leg="a100")
    body = render(report(new_failures=[failure]), None, OPTIONS)
    (line,) = [x for x in body.splitlines() if "p2p-bf16" in x]
    assert "on `a100`" in line
    assert test.text() == (
        "failed 3/3 attempts; known flaky rate <= 0.45; chance 9.0% < 20% "
        "(9/30 attempts failed on branch runs)"
    )
    assert md.text(test.text()) in line
    plain = render(report(new_failures=[verdict("p2p-bf16")]), None, OPTIONS)
    assert "passes at base" not in plain  # the section's title says as much
