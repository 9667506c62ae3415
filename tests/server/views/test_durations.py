"""The durations endpoint and the plan-hash flag, over real HTTP to a real uvicorn, on SQLite and
PostgreSQL: medians of passing results of the newest trusted branch runs (never a PR's, never
another branch's), and shards of one run planned from different inputs flagged in the PR report,
its comment and the UI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from cpci import urls
from cpci.github.comment import render
from cpci.schema import ConfigDurations, PullRequestReport
from cpci.server import Settings, create_app
from tests.builders import BASE, HEAD, REPO, as_json, envelope, record, send, sha, upload
from tests.live_server import serve

A, B = "tests/test_cp.py::test_attn[a]", "tests/test_cp.py::test_attn[b]"


@pytest.fixture
def http(engine: Engine, db_url: str, token: str) -> Iterator[httpx.Client]:
    app = create_app(Settings(database_url=db_url), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def _branch_run(http: httpx.Client, n: int, seconds: dict[str, float], **fields: Any) -> None:
    """Run `n` of the branch: config name -> seconds, each passing."""
    results = [record(name, duration_s=s) for name, s in seconds.items()]
    fields = {"commit": sha(n), "ci_run_id": str(n), **fields}
    upload(http, envelope(results, **fields))


def _durations(http: httpx.Client, **query: Any) -> ConfigDurations:
    response = http.get(urls.api_durations(REPO, **query))
    assert response.status_code == 200, response.text
    return ConfigDurations.model_validate(response.json())


def test_medians_of_passing_results_over_the_newest_branch_runs(http: httpx.Client) -> None:
    _branch_run(http, 1, {"a": 100.0, "b": 100.0})  # too old once runs=3
    _branch_run(http, 2, {"a": 2.0, "b": 4.0})
    _branch_run(http, 3, {"a": 4.0, "b": 8.0})
    upload(
        http,
        envelope(
            [record("a", duration_s=6.0), record("c", "failed", duration_s=999.0, message="x")],
            commit=sha(4),
            ci_run_id="4",
        ),
    )
    # Neither a PR's run nor another branch's run counts by default.
    _branch_run(http, 5, {"a": 500.0}, pull_request=7, base_commit=sha(4), branch="feature")
    _branch_run(http, 6, {"a": 700.0}, branch="dev")
    _branch_run(http, 7, {"a": 1.0}, ci_attempt=2, commit=sha(4), ci_run_id="4")  # a rerun

    got = _durations(http, branch="main", runs=3)
    assert got.branch == "main"
    assert got.runs == 3
    assert got.newest_commit == sha(4)
    # Run 4's two attempts count as one run, each attempt's passing result one sample
    # (a: 2, 4, 6 and 1); c never passed, so it has none.
    assert got.durations == {A: 3.0, B: 6.0}

    default = _durations(http)  # the branch most recent branch runs were on; 10 runs
    assert default.branch == "main"
    assert default.runs == 4
    assert default.durations == {A: 4.0, B: 8.0}
    assert _durations(http, branch="dev").durations == {A: 700.0}
    assert _durations(http, branch="nowhere") == ConfigDurations(
        repository=REPO, branch="nowhere", runs=0, newest_commit=None, durations={}
    )


def test_bad_queries_are_422_and_the_endpoint_is_in_the_schema(http: httpx.Client) -> None:
    _branch_run(http, 1, {"a": 1.0})
    for query in ("runs=0", "runs=101", "runs=x", "branch=", "branch=a%00b", f"branch={'b' * 256}"):
        response = http.get(f"{urls.api_durations(REPO)}?{query}")
        assert response.status_code == 422, query
    assert http.get(urls.api_durations("acme/none")).status_code == 404
    spec = http.get("/openapi.json").json()
    operation = spec["paths"]["/api/v1/repos/{owner}/{repo}/durations"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"owner", "repo", "branch", "runs"}
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("/ConfigDurations")


def test_reads_need_a_token_where_reads_do(engine: Engine, db_url: str, token: str) -> None:
    app = create_app(Settings(database_url=db_url, read_access="token"), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.get(urls.api_durations(REPO)).status_code == 401
        client.headers["Authorization"] = f"Bearer {token}"
        upload(client, envelope([record("a", duration_s=3.0)]))
        assert client.get(urls.api_durations(REPO)).json()["durations"] == {A: 3.0}


def _pr_shard(http: httpx.Client, index: int, plan_hash: str | None, leg: str = "") -> None:
    body = envelope(
        [record(f"s{index}{leg}", duration_s=1.0)],
        commit=HEAD,
        base_commit=BASE,
        branch="feature",
        pull_request=7,
        ci_run_id="200",
        shard_index=index,
        shard_total=4,
        leg=leg,
        plan_hash=plan_hash,
    )
    upload(http, body)


def _report(http: httpx.Client) -> PullRequestReport:
    response = http.get(urls.api_pull_report(REPO, 7))
    assert response.status_code == 200, response.text
    return PullRequestReport.model_validate(response.json())


def test_shards_planned_from_different_inputs_are_flagged(http: httpx.Client) -> None:
    upload(http, envelope([record("s0")]))  # the base
    same, other = "a" * 64, "b" * 64
    _pr_shard(http, 0, same)
    _pr_shard(http, 1, other)
    _pr_shard(http, 2, same)
    _pr_shard(http, 3, None)  # an older runner: no hash, never flagged
    report = _report(http)
    expected = (
        "shards 0/4 and 1/4 were planned from different inputs: configs may have been "
        "dropped or run twice"
    )
    assert [m.text for m in report.shards.plan_mismatches] == [expected]
    assert report.shards.plan_mismatches[0].groups == [[0, 2], [1]]
    assert [m.text for m in report.head_runs[0].shards.plan_mismatches] == [expected]

    comment = render(report, None)
    assert "Shard plans differ" in comment
    assert "shards 0/4 and 1/4 were planned from different inputs" in comment
    page = http.get(urls.pull(REPO, 7))
    assert page.status_code == 200
    assert f"Shard plans differ: {expected}" in page.text
    run_page = http.get(urls.run(REPO, "200"))
    assert f"Shard plans differ: {expected}" in run_page.text


def test_the_same_plan_on_every_shard_is_not_flagged(http: httpx.Client) -> None:
    upload(http, envelope([record("s0")]))
    for index in range(4):
        _pr_shard(http, index, "c" * 64)
    report = _report(http)
    assert report.shards.plan_mismatches == []
    assert "Shard plans differ" not in render(report, None)
    assert "Shard plans differ" not in http.get(urls.pull(REPO, 7)).text


def test_legs_are_compared_apart(http: httpx.Client) -> None:
    """Two legs may collect different configs (another GPU skips some): only shards of one leg
    must agree."""
    upload(http, envelope([record("s0")]))
    for index in range(4):
        _pr_shard(http, index, "d" * 64, leg="h100")
        _pr_shard(http, index, "e" * 64 if index != 3 else "f" * 64, leg="a100")
    report = _report(http)
    assert [(m.leg, m.groups) for m in report.shards.plan_mismatches] == [
        ("a100", [[0, 1, 2], [3]])
    ]
    assert "shards 0/4 and 3/4 on leg a100 were planned" in report.shards.plan_mismatches[0].text


def test_a_bad_plan_hash_is_422(http: httpx.Client) -> None:
    body = as_json(envelope([record("a")]))
    assert send(http, {**body, "plan_hash": "not-a-sha"}).status_code == 422
