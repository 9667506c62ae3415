"""The PR comment: golden bodies (read them by eye), hostile names, the size limit, the upsert."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from cpci.github import markdown as md
from cpci.github.client import COMMENT_LIMIT, GitHubClient
from cpci.github.comment import MARKER, CommentOptions, gate_recorded_in, render
from cpci.github.consistency import ConsistencyResult, acknowledgements, evaluate
from cpci.github.models import ChangedFile
from cpci.github.publish import upsert_comment
from cpci.github.rules import parse_rules
from cpci.schema import FlakeTest, PlanMismatch, PullRequestReport, ShardProgress
from tests.builders import drift, flaky_evidence, report, verdict
from tests.github.fake_github import FakeGitHub
from tests.github.gfm import fenced_blocks
from tests.github.pairs import EMPTY_BATCH, WORKER_V1, WORKER_V2, edit, git_apply, pair
from tests.github.pairs import RULES as PAIR_RULES
from tests.github.pairs import V1 as PAIR_V1
from tests.github.pairs import V2 as PAIR_V2

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


def _mixed_report() -> PullRequestReport:
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


def _consistency() -> ConsistencyResult:
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


def _drifts(title: str = "", body: str = ""):  # type: ignore[no-untyped-def]
    """The pair's comment: v2 fixes `train`, and edits `get_logprobs` where v1 differs."""
    v2_head = edit(WORKER_V2, *EMPTY_BATCH)
    v2_head = edit(v2_head, "torch.inference_mode()", "torch.inference_mode(), self.ctx()")
    return evaluate(
        parse_rules(PAIR_RULES),
        [ChangedFile(filename=PAIR_V2, status="modified")],
        acknowledgements((), body),
        reader=pair(v2_head=v2_head),
        title=title,
    )


def test_golden_function_level_drift() -> None:
    _golden("drift.md", render(None, _drifts(), OPTIONS, repository="o/r", pull_request=7))


def test_a_drift_names_both_functions_shows_the_hunk_and_a_patch_that_applies(
    tmp_path: Path,
) -> None:
    body = render(None, _drifts(), OPTIONS, repository="o/r", pull_request=7)
    assert md.text("2 function(s) to port") in body
    link = md.link(f"{PAIR_V2}#L13-L19", f"https://github.com/o/r/blob/head/{PAIR_V2}#L13-L19")
    assert f"`DTensorPolicyWorkerV2.train` ({link}) changed; its twin" in body
    assert "`cpci-ack: workers:DTensorPolicyWorkerV2.train`" in body
    conflict = md.text("the change does not apply cleanly to `DTensorPolicyWorker.get_logprobs`")
    assert f"⚠️ {conflict}" in body
    assert f"<details><summary>Patch for <code>{PAIR_V1}</code>" in body
    hunk, patch, _conflict_hunk = fenced_blocks(body, "diff")
    assert "+        return sum(losses) / max(len(losses), 1)\n" in hunk
    after = git_apply(tmp_path, {PAIR_V1: WORKER_V1}, patch)
    assert after[PAIR_V1] == edit(WORKER_V1, *EMPTY_BATCH)


def test_an_acknowledged_drift_shows_no_block_and_a_fix_says_it_raised() -> None:
    acked = render(None, _drifts(body="cpci-ack: workers:train"), OPTIONS)
    assert md.text("1 function(s) to port") in acked
    assert acked.count("<details>") == 0
    assert "1 acknowledged" in acked
    fix = render(None, _drifts(title="fix: empty batches"), OPTIONS)
    assert "raised to fail: this PR is a fix" in fix
    assert "**fail** `workers`: `DTensorPolicyWorkerV2.train`" in fix
    assert gate_recorded_in(fix) == "failure"


def test_many_drifts_still_fit_the_comment_and_point_at_the_full_report() -> None:
    consistency = _drifts()
    [finding] = consistency.findings
    many = [
        d.model_copy(update={"hunk": d.hunk * 40, "patch": d.patch and d.patch * 20})
        for d in finding.drifts * 60
    ]
    consistency.findings[0] = finding.model_copy(update={"drifts": many})
    body = render(None, consistency, OPTIONS, repository="o/r", pull_request=7)
    assert len(body) <= COMMENT_LIMIT
    assert "more function(s) to port in the [full report]" in body


@pytest.mark.parametrize(
    ("service_url", "shown"),
    [
        ("https://cpci.example.com", "](https://cpci.example.com/ui/acme/attn/runs/local-1))"),
        (None, "(failed in run local\\-1)"),
    ],
)
def test_a_flaky_configs_runs_not_run_by_github_link_to_the_service_or_to_nothing(
    service_url: str | None, shown: str
) -> None:
    local = (
        flaky_evidence()
        .failing_runs[0]
        .model_copy(update={"ci_run_id": "local-1", "url": "/ui/acme/attn/runs/local-1"})
    )
    known = flaky_evidence(failing_runs=[local])
    item = verdict("a2a", "flaky", reason="known flaky", flakiness=known)
    body = render(report(flaky=[item]), None, CommentOptions(service_url=service_url))
    assert shown in body
    assert "](/ui/" not in body  # a bare path would lead to a page of GitHub's own


def test_a_body_that_outgrows_the_limit_even_without_items_is_cut_with_a_link() -> None:
    """The last resort: a headline and scope longer than the limit, whatever the item cap."""
    failures = [verdict(f"c{n}", "new_failure") for n in range(3)]
    tight = CommentOptions(service_url="https://cpci.example.com", limit=300)
    body = render(report(new_failures=failures), None, tight)
    assert len(body) <= 300
    assert body.endswith(
        "\n\n… truncated: [full report](https://cpci.example.com/ui/acme/attn/pulls/42)"
    )
    assert body.startswith("<!-- cpci:pr-report state=failure -->")


@pytest.mark.parametrize(("count", "folded"), [(5, False), (6, True)])
def test_a_section_is_folded_past_five_items(count: int, folded: bool) -> None:
    body = render(report(new_failures=[verdict(f"c{i}") for i in range(count)]), None, OPTIONS)
    assert (f"### ❌ New failures ({count})" in body) != folded
    assert (f"<b>❌ New failures ({count})</b>" in body) == folded


@pytest.mark.parametrize("kind", ["no_baseline", "infra"])
@pytest.mark.parametrize(("length", "shown"), [(200, "r" * 200), (201, "r" * 199 + "…")])
def test_a_verdicts_reason_is_cut_at_200_characters(kind: str, length: int, shown: str) -> None:
    item = verdict("new-config", kind, reason="r" * length)
    sections: dict[str, Any] = {kind: [item]}
    body = render(report(**sections), None, OPTIONS)
    assert f"— {shown} ·" in body


def test_as_room_runs_out_a_section_lists_50_then_20_8_3_items_then_none() -> None:
    failures = report(new_failures=[verdict(f"c{i:02d}") for i in range(60)])
    listed: list[int] = []
    for limit in range(len(render(failures, None, OPTIONS)), 300, -25):
        body = render(failures, None, CommentOptions(service_url=OPTIONS.service_url, limit=limit))
        assert len(body) <= limit
        count = sum(line.startswith("- `tests/") for line in body.splitlines())
        if not listed or listed[-1] != count:
            listed.append(count)
    assert listed == [50, 20, 8, 3, 0]


def test_a_shard_plan_warning_names_at_most_five_mismatches() -> None:
    legs = ["a100", "h100", "h200", "b200", "mi300", "l40s"]
    mismatches = [PlanMismatch(leg=leg, shard_total=4, groups=[[0, 1], [2, 3]]) for leg in legs]
    shards = ShardProgress(reported=8, expected=8, missing=[], plan_mismatches=mismatches)
    body = render(report().model_copy(update={"shards": shards}), None, OPTIONS)
    (line,) = [x for x in body.splitlines() if "Shard plans differ" in x]
    assert line.count("were planned from different inputs") == 5
    assert "on leg mi300 were planned" in line
    assert "l40s" not in line


@pytest.mark.parametrize("field", ["note", "patch_problem"])
@pytest.mark.parametrize(("length", "shown"), [(500, "n" * 500), (501, "n" * 499 + "…")])
def test_a_drifts_note_and_patch_problem_are_cut_at_500_characters(
    field: str, length: int, shown: str
) -> None:
    consistency = _drifts()
    [finding] = consistency.findings
    drifts = [d.model_copy(update={field: "n" * length, "patch": None}) for d in finding.drifts]
    consistency.findings[0] = finding.model_copy(update={"drifts": drifts})
    body = render(None, consistency, OPTIONS, repository="o/r", pull_request=7)
    assert re.search(f"(?<!n){shown}(?!n)", body)


@pytest.mark.parametrize(("length", "shown"), [(12_000, True), (12_001, False)])
def test_a_patch_is_shown_up_to_its_limit_and_only_named_past_it(length: int, shown: bool) -> None:
    consistency = _drifts()
    [finding] = consistency.findings
    drifts = [d.model_copy(update={"patch": "+" * length}) for d in finding.drifts]
    consistency.findings[0] = finding.model_copy(update={"drifts": drifts})
    body = render(None, consistency, OPTIONS, repository="o/r", pull_request=7)
    assert (f"<details><summary>Patch for <code>{PAIR_V1}</code>" in body) is shown
    assert ("too long for this comment" in body) is not shown


def test_a_findings_line_names_ten_files_and_cuts_its_message_at_500_characters() -> None:
    consistency = _drifts()
    [finding] = consistency.findings
    files = [f"pkg/mod{i}.py" for i in range(12)]
    for length, shown in [(500, "m" * 500), (501, "m" * 499 + "…")]:
        update = {"files": files, "message": "m" * length}
        consistency.findings[0] = finding.model_copy(update=update)
        body = render(None, consistency, OPTIONS, repository="o/r", pull_request=7)
        assert "`pkg/mod9.py`" in body
        assert "`pkg/mod10.py`" not in body
        assert re.search(f"(?<!m){shown}(?!m)", body)


def test_a_shard_plan_mismatch_is_cut_at_300_characters() -> None:
    mismatch = PlanMismatch(leg="x" * 400, shard_total=4, groups=[[0, 1], [2, 3]])
    shards = ShardProgress(reported=8, expected=8, missing=[], plan_mismatches=[mismatch])
    body = render(report().model_copy(update={"shards": shards}), None, OPTIONS)
    (line,) = [x for x in body.splitlines() if "Shard plans differ" in x]
    shown = line.split("**: ", 1)[1]
    assert shown.endswith("…")
    assert len(shown.replace("\\", "")) == 300  # escapes aside
