"""What the runner's evidence adds to the PR comment and the check run: FLAKY ON ARRIVAL with
its arrival runs (it gates), quarantined configs under their own heading (never gating),
"decided after k attempts" and an order-dependent failure's polluter."""

from __future__ import annotations

from datetime import datetime, timezone

from cpci.github import markdown as md
from cpci.github.comment import CommentOptions, gate_recorded_in, render
from cpci.github.publish import check_run_fields
from cpci.schema import ArrivalRuns, OrderDependence, PullRequestReport, QuarantineState
from tests.builders import HEAD, report, verdict
from tests.github.test_comment import OPTIONS, _golden

ARRIVAL_REASON = (
    "passed and failed at the head commit itself (1 of 2 runs failed, arrival runs included); it "
    "is new to the base branch: a flaky config is being added"
)
POLLUTER = OrderDependence(polluters=["tests/test_cp.py::test_leaks_state"], replays=7, searched=64)
HELD = QuarantineState(
    since=datetime(2026, 11, 20, tzinfo=timezone.utc), by="token:ci-bot", reason="#1234 flakes"
)


def _arrival() -> PullRequestReport:
    return report(
        flaky_on_arrival=[
            verdict(
                "ring-new",
                "flaky_on_arrival",
                reason=ARRIVAL_REASON,
                base_outcome=None,
                arrival=ArrivalRuns(failed=1, runs=2),
                attempts=3,
            )
        ]
    )


def _quarantined(**sections: object) -> PullRequestReport:
    held = verdict(
        "ulysses-fp8",
        "quarantined",
        reason="quarantined by token:ci-bot since 2026-11-20 (#1234 flakes); at head: new "
        "failure (passes at base, fails at head)",
        quarantine=HELD,
        would_be="new_failure",
    )
    return report(quarantined=[held], **sections)  # type: ignore[arg-type]


def test_golden_arrival_quarantine_polluter_and_decided() -> None:
    body = render(
        _quarantined(
            new_failures=[
                verdict(
                    "p2p-bf16",
                    reason="order-dependent: " + POLLUTER.text() + "; passes alone",
                    order_dependence=POLLUTER,
                ),
                verdict("a2a-fp16", decided_after=2, attempts=2),
            ],
            flaky_on_arrival=_arrival().flaky_on_arrival,
        ),
        None,
        OPTIONS,
    )
    _golden("evidence.md", body)


def test_flaky_on_arrival_gates_with_its_arrival_runs_shown() -> None:
    body = render(_arrival(), None, OPTIONS)
    assert gate_recorded_in(body) == "failure"
    assert "## ❌ cpci: 1 flaky on arrival" in body
    assert "### 🐣 Flaky on arrival (1)" in body  # open: it gates
    assert md.text("(1 of 2 runs failed, arrival runs included)") in body
    check = check_run_fields(_arrival(), None, head_sha=HEAD)
    assert (check["conclusion"], check["output"]["title"]) == ("failure", "1 flaky on arrival")


def test_quarantined_configs_have_their_heading_and_never_gate() -> None:
    for fail_on in ("new-failures", "any-failure"):
        options = CommentOptions(service_url=OPTIONS.service_url, fail_on=fail_on)
        body = render(_quarantined(), None, options)
        assert gate_recorded_in(body) == "success", fail_on
    assert "<summary><b>🔒 Quarantined (1)</b></summary>" in body
    line = next(x for x in body.splitlines() if "ulysses-fp8" in x)
    who = f"quarantined by {md.text('token:ci-bot')} since 2026-11-20: {md.text('#1234 flakes')}"
    assert f"new failure — {who}" in line
    check = check_run_fields(_quarantined(), None, head_sha=HEAD)
    assert check["conclusion"] == "success"
    # Beside a real new failure the gate still fails, on that one alone.
    both = _quarantined(new_failures=[verdict("p2p-bf16")])
    assert check_run_fields(both, None, head_sha=HEAD)["output"]["title"] == "1 new failure(s)"


def test_a_failures_line_says_when_the_chance_test_decided_it_and_who_polluted_it() -> None:
    body = render(
        report(
            new_failures=[
                verdict("a", decided_after=2, attempts=2),
                verdict("b", decided_after=1),
                verdict("c", reason="order-dependent: " + POLLUTER.text() + "; passes alone"),
                verdict("d", attempts=3),
            ]
        ),
        None,
        OPTIONS,
    )
    lines = {name: next(x for x in body.splitlines() if f"[{name}]@2" in x) for name in "abcd"}
    assert "— decided after 2 attempts" in lines["a"]
    assert "— decided after 1 attempt —" in lines["b"]
    polluter = "order-dependent: " + POLLUTER.text() + "; passes alone"
    assert md.text(polluter) in lines["c"]
    assert (
        "fails after tests/test\\_cp\\.py::test\\_leaks\\_state; found in 7 replays" in lines["c"]
    )
    assert "decided" not in lines["d"]
