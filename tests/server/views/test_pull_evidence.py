"""The runner's evidence in a PR's verdicts, end to end on both engines: records as the runner
writes them (arrival runs, a bisected order-dependent failure, a failure the chance test
decided) uploaded to a real uvicorn on 127.0.0.1, a config quarantined through the API, and the
PR report read back as the Action's report mode reads it (`ServiceClient.pull_report`), then
rendered as the comment and check run, and the PR page. FLAKY ON ARRIVAL gates, the quarantined
config is listed apart and gates nothing until it is released, and the polluter is named."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from cpci import urls
from cpci.evidence import RerunRule, decide_rerun
from cpci.github import markdown as md
from cpci.github.comment import CommentOptions, gate_recorded_in, render
from cpci.github.publish import check_run_fields
from cpci.schema import (
    ConfigEvidence,
    FlakeRecord,
    OrderDependence,
    PullRequestReport,
    ResultRecord,
)
from cpci.server import Settings, create_app
from cpci.server.crud.tokens import create_token
from cpci.upload.service_client import ServiceClient
from tests.builders import HEAD, REPO, config, envelope, nodeid, record, sha, upload
from tests.live_server import serve

MAIN_RUNS = 10
BASE = sha(MAIN_RUNS)
ERROR = "AssertionError: max abs err 3.1e-02 > 1e-03"
POLLUTER = OrderDependence(polluters=[nodeid("leaks-state")], replays=7, searched=64)


@pytest.fixture
def service(engine: Engine, db_url: str) -> Iterator[tuple[httpx.Client, ServiceClient]]:
    """A live service over this test's database: an HTTP client holding a branch-scoped token
    (uploads, quarantines) and the uploader's own client of the service (reads the report)."""
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO, name="ci", scope="branch").token
        session.commit()
    with serve(create_app(Settings(database_url=db_url), engine=engine)) as base:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            reader = ServiceClient(base, token)
            yield http, reader


def seed_main(http: httpx.Client) -> None:
    """Ten passing runs of main: every config the PR keeps is stable there."""
    for n in range(1, MAIN_RUNS + 1):
        names = ("stable", "polluted", "decided", "held")
        results = [record(name) for name in names]
        upload(http, envelope(results, commit=sha(n), ci_run_id=str(n)))


def decided_attempts() -> list[ResultRecord]:
    """A stable config's two failures, the second with the stop reason the runner's rule wrote
    (the chance test called it the PR's after two attempts, on 40 passing attempts of main)."""
    first = record("decided", "failed", message=ERROR)
    second = record("decided", "failed", message=ERROR, attempt=2)
    evidence = ConfigEvidence(record=FlakeRecord(failures=0, trials=40), runs=40)
    stop = decide_rerun([first, second], evidence, RerunRule(cap=3))
    assert stop.kind == "decided", stop.why
    return [first, second.model_copy(update={"stop_reason": stop.why})]


def pr_upload(http: httpx.Client, pr: int, results: list[ResultRecord]) -> None:
    upload(
        http,
        envelope(
            results,
            commit=HEAD,
            branch="feature",
            pull_request=pr,
            base_commit=BASE,
            ci_run_id=str(700 + pr),
        ),
    )


def quarantine(http: httpx.Client, name: str) -> None:
    body = {"config": config(name), "reason": "#1234: flakes on H100"}
    added = http.post(urls.api_quarantines(REPO), json=body)
    assert added.status_code == 201, added.text


def pull_report(reader: ServiceClient, pr: int) -> PullRequestReport:
    found = reader.pull_report(REPO, pr)
    assert found is not None
    return found


def test_flaky_on_arrival_gates_and_the_polluter_and_decision_are_shown(
    service: tuple[httpx.Client, ServiceClient],
) -> None:
    http, reader = service
    seed_main(http)
    pr_upload(
        http,
        7,
        [
            record("stable"),
            # New to main: passed its first run, then failed one of its two arrival runs.
            record("ring-new"),
            record("ring-new", "failed", message=ERROR, attempt=2, arrival=True),
            record("ring-new", attempt=3, arrival=True),
            # Failed in its shared world after a predecessor, passed alone: bisected.
            record(
                "polluted",
                "failed",
                message="AssertionError: stale state from an earlier test",
                isolation="order-dependent",
                order_dependence=POLLUTER,
            ),
            record("polluted", attempt=2),
            *decided_attempts(),
            record("held"),
        ],
    )
    report = pull_report(reader, 7)
    (arrived,) = report.flaky_on_arrival
    assert arrived.config == config("ring-new")
    assert (
        arrived.arrival and arrived.arrival.text()
    ) == "1 of 3 runs failed, arrival runs included"
    assert arrived.message == ERROR
    assert "it is new to the base branch: a flaky config is being added" in arrived.reason
    by_name = {v.config: v for v in report.new_failures}
    assert sorted(by_name) == [config("decided"), config("polluted")]
    polluted = by_name[config("polluted")]
    assert polluted.order_dependence == POLLUTER
    assert polluted.reason.startswith(
        f"order-dependent: fails after {nodeid('leaks-state')}; found in 7 replays among 64 "
        "predecessors; passes alone"
    )
    assert (by_name[config("decided")].decided_after, polluted.decided_after) == (2, None)
    assert report.counts.by_verdict == {"flaky_on_arrival": 1, "new_failure": 2, "passed": 2}

    body = render(report, None, CommentOptions(service_url="https://cpci.example.com"))
    assert gate_recorded_in(body) == "failure"
    assert "## ❌ cpci: 2 new failure(s), 1 flaky on arrival" in body
    assert "### 🐣 Flaky on arrival (1)" in body
    assert md.text("(1 of 3 runs failed, arrival runs included)") in body
    decided = next(line for line in body.splitlines() if "[decided]@2" in line)
    assert "— decided after 2 attempts —" in decided
    assert md.text(POLLUTER.text()) in body
    check = check_run_fields(report, None, head_sha=HEAD)
    assert check["output"]["title"] == "2 new failure(s), 1 flaky on arrival"
    assert check["output"]["summary"].startswith("2 new failure(s), 1 flaky on arrival;")
    assert check["conclusion"] == "failure"
    section = http.get(urls.api_pull_report_section(REPO, 7, "flaky_on_arrival"))
    assert section.status_code == 200, section.text
    assert [v["config"] for v in section.json()["verdicts"]] == [config("ring-new")]

    page = http.get(urls.pull(REPO, 7))
    assert page.status_code == 200, page.text
    assert 'data-verdict="flaky_on_arrival"' in page.text
    assert "1 of 3 runs failed, arrival runs included" in page.text
    assert "decided after 2 attempts" in page.text
    assert f"fails after {nodeid('leaks-state')}; found in 7 replays" in page.text


def test_a_quarantined_config_is_listed_apart_and_gates_nothing_until_released(
    service: tuple[httpx.Client, ServiceClient],
) -> None:
    http, reader = service
    seed_main(http)
    quarantine(http, "held")
    pr_upload(http, 8, [record("stable"), record("held", "failed", message=ERROR)])
    report = pull_report(reader, 8)
    assert report.new_failures == []
    (held,) = report.quarantined
    assert (held.config, held.would_be, held.head_outcome) == (
        config("held"),
        "new_failure",
        "failed",
    )
    assert held.quarantine is not None
    assert held.quarantine.reason == "#1234: flakes on H100"
    assert held.reason.startswith("quarantined by token:")
    for fail_on in ("new-failures", "any-failure"):
        options = CommentOptions(fail_on=fail_on)
        body = render(report, None, options)
        assert gate_recorded_in(body) == "success", fail_on
    assert "<summary><b>🔒 Quarantined (1)</b></summary>" in body
    assert check_run_fields(report, None, head_sha=HEAD)["conclusion"] == "success"
    page = http.get(urls.pull(REPO, 8))
    assert 'data-verdict="quarantined"' in page.text
    assert 'data-gate="success"' in page.text

    # Released by hand, the same head (no upload between) gates on it again.
    released = http.post(
        urls.api_quarantine_release(REPO),
        json={"config": config("held"), "reason": "fixed in #1240"},
    )
    assert released.status_code == 200, released.text
    again = pull_report(reader, 8)
    assert (again.quarantined, [v.config for v in again.new_failures]) == ([], [config("held")])
    assert gate_recorded_in(render(again, None)) == "failure"
