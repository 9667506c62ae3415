"""The UI's pages and their JSON twins on both engines, through the app (no browser)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session

from cpci.github.bot import PullState
from cpci.github.consistency import ConsistencyResult, Finding
from cpci.server.crud.github import save_pull_state
from tests.builders import config, envelope, record, replaced, send
from tests.server.ui.ui_seed import (
    A2A,
    LATEST_RUN,
    MAIN_RUNS,
    NAMES,
    PR,
    PR_FAILS,
    REPO,
    RING,
    RING_FAILED_COMMITS,
    XSS,
    XSS_CONFIG,
    main_run,
    seed,
)

API = f"/api/v1/repos/{REPO}"


def test_dashboard_twin_counts_runs_flaky_slow_and_pulls(client: TestClient) -> None:
    seed(client)
    data = client.get(f"{API}/dashboard").json()
    assert data["branch"] == "main"
    assert [r["run"]["ci_run_id"] for r in data["runs"]] == [
        str(1000 + r) for r in range(MAIN_RUNS, 0, -1)
    ]
    assert all(r["results"] == len(NAMES) for r in data["runs"])
    assert {f["config"] for f in data["flaky"]} == {A2A, RING}
    assert data["slowest"][0]["config"] == XSS_CONFIG  # the seed makes later configs slower
    (pull,) = data["pulls"]
    assert (pull["number"], pull["verdict"]) == (PR, "new_failures")
    assert (pull["failing"], pull["failing_at_base_too"]) == (len(PR_FAILS), 0)
    # The HTML page shows the same figures.
    html = client.get(f"/ui/{REPO}").text
    assert html.count('class="point ') == MAIN_RUNS
    assert f'href="/ui/{REPO}/pulls/{PR}"' in html


def test_pending_pull_has_no_verdict(client: TestClient) -> None:
    body = envelope([record("p2p", "failed")], pull_request=3, shard_total=2, branch="x")
    assert send(client, body).status_code == 201
    (pull,) = client.get(f"{API}/dashboard").json()["pulls"]
    assert pull["verdict"] == "pending"
    assert pull["shards"]["text"] == "1/2 shards reported"


def test_config_twin_blames_the_host(client: TestClient) -> None:
    seed(client)
    data = client.get(f"{API}/config", params={"config": RING}).json()
    rates = {r["name"]: r["pass_rate"] for r in data["runners"]}
    assert rates == {"gpu-a": 1.0, "gpu-b": 0.0}
    assert data["elsewhere"].startswith("fails mostly on gpu-b (0% pass)")
    assert sum(c["state"] == "fail" for c in data["timeline"]) == RING_FAILED_COMMITS
    assert [s["count"] for s in data["signatures"]] == [RING_FAILED_COMMITS]
    missing = client.get(f"{API}/config", params={"config": "nope@2"})
    assert missing.status_code == 404


def test_run_twin_filters_sorts_and_pages_in_the_database(client: TestClient) -> None:
    seed(client)
    path = f"{API}/runs/{LATEST_RUN}/detail"
    data = client.get(path, params={"sort": "-duration", "per_page": 2}).json()
    assert (data["matching"], data["pages"]) == (len(NAMES), 3)
    durations = [r["duration_s"] for r in data["results"]]
    assert durations == sorted(durations, reverse=True)
    assert data["results"][0]["config"] == XSS_CONFIG
    last = client.get(path, params={"sort": "-duration", "per_page": 2, "page": 3}).json()
    assert len(last["results"]) == 1
    named = client.get(path, params={"q": "A2A"}).json()  # case-insensitive on both engines
    assert [r["config"] for r in named["results"]] == [A2A]
    failed = client.get(path, params={"outcome": "failed"}).json()
    assert {r["outcome"] for r in failed["results"]} <= {"failed"}
    assert failed["matching"] == failed["result_outcomes"].get("failed", 0)
    assert [s["state"] for s in data["shards"]] == ["reported", "reported"]
    assert sum(s["results"] for s in data["shards"]) == len(NAMES)
    assert all(s["wall_s"] == 60 and s["other_s"] == 60 - s["test_s"] for s in data["shards"])
    assert client.get(path, params={"outcome": "nonsense"}).status_code == 422


def test_html_from_uploads_is_escaped_everywhere(client: TestClient) -> None:
    seed(client)
    pages = [
        f"/ui/{REPO}",
        f"/ui/{REPO}/config?config={XSS_CONFIG}",
        f"/ui/{REPO}/config?config={A2A}",
        f"/ui/{REPO}/runs/{LATEST_RUN}",
        f"/ui/{REPO}/runs/2000",
        f"/ui/{REPO}/pulls/{PR}",
    ]
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        for raw in (XSS, "<b>NCCL", "<i>p2p"):
            assert raw not in response.text, path
    shown = client.get(pages[0]).text.replace("<wbr>", "")  # config ids may wrap after a /
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown


def test_ui_errors_are_pages_and_api_errors_stay_json(client: TestClient) -> None:
    page = client.get("/ui/acme/none")
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "no results for repository &#39;acme/none&#39;" in page.text
    api = client.get("/api/v1/repos/acme/none/dashboard")
    assert (api.status_code, api.json()["code"]) == (404, "not_found")
    assert client.get("/ui/static/ui.css").headers["content-type"].startswith("text/css")
    assert XSS not in client.get("/ui/").text


def test_dashboard_sees_a_new_upload_at_once(client: TestClient) -> None:
    seed(client)
    before = client.get(f"{API}/dashboard").json()
    assert config("p2p") not in {f["config"] for f in before["flaky"]}
    # p2p fails on a commit and environment where it passed: direct evidence of flakiness.
    shard = main_run(MAIN_RUNS)[0]
    results = [
        replaced(r, outcome="failed", rank_errors=[{"rank": 0, "phase": "call", "message": "x"}])
        if r.nodeid.endswith("[p2p]")
        else r
        for r in shard.results
    ]
    rerun = replaced(shard, ci_run_id="3000", shard_total=1, results=results)
    assert send(client, rerun).status_code == 201
    after = client.get(f"{API}/dashboard").json()
    assert after["runs"][0]["run"]["ci_run_id"] == "3000"
    assert config("p2p") in {f["config"] for f in after["flaky"]}


def test_pull_page_shows_the_stored_consistency_findings(
    client: TestClient, engine: Engine
) -> None:
    seed(client)
    finding = Finding(
        rule="dtensor-pair",
        level="fail",
        severity="fail",
        message="keep <em>both</em> in step",
        changed=["workers/v2.py"],
        unchanged=["workers/v1.py"],
        files=["workers/v2.py"],
        acknowledged=False,
    )
    twin = f"{API}/pulls/{PR}/page"
    assert client.get(twin).json()["consistency"] is None
    with Session(engine) as session:
        state = PullState("c" * 40, 1, 2, ConsistencyResult(rules=1, files=3, findings=[finding]))
        save_pull_state(session=session, repository=REPO, number=PR, state=state)
        session.commit()
    data = client.get(twin).json()
    assert data["consistency"]["findings"][0]["rule"] == "dtensor-pair"
    assert data["report"]["pull_request"] == PR
    html = client.get(f"/ui/{REPO}/pulls/{PR}").text
    assert "workers/v1.py" in html
    assert "keep &lt;em&gt;both&lt;/em&gt; in step" in html


def test_run_twin_splits_world_start_up_from_test_time(client: TestClient) -> None:
    started = "2026-01-01T00:00:00Z"
    ended = "2026-01-01T00:00:20Z"

    def world(index: int, start_s: float) -> dict[str, object]:
        return {"index": index, "world": 0, "size": 2, "start_s": start_s}

    results = [
        record("a", duration_s=1.0, batch=world(0, 4.0)),
        record("b", duration_s=2.0, batch=world(0, 4.0)),
        record("c", duration_s=3.0, batch=world(1, 5.0)),
    ]
    send(
        client,
        envelope(results, ci_run_id="900", started_at=started, ended_at=ended),
    )
    shard = client.get(f"{API}/runs/900/detail").json()["shards"][0]
    assert shard["worlds"] == 2
    assert shard["init_s"] == 9.0  # two worlds: 4 s + 5 s of start-up
    assert shard["test_s"] == 6.0
    assert shard["other_s"] == 5.0  # 20 s wall - 9 - 6


def test_a_run_page_links_the_ci_run_only_where_github_ran_it(client: TestClient) -> None:
    for run_id in ("4242", "local-20250615T150810Z"):
        body = envelope([record("p2p")], ci_run_id=run_id, ci_attempt=2)
        assert send(client, body).status_code == 201
    github = f"https://github.com/{REPO}/actions/runs/4242/attempts/2"
    assert client.get(f"{API}/runs/4242/detail").json()["ci_run_url"] == github
    assert f'<a id="ci-run" href="{github}">CI run</a>' in client.get(f"/ui/{REPO}/runs/4242").text
    local = "local-20250615T150810Z"
    assert client.get(f"{API}/runs/{local}/detail").json()["ci_run_url"] is None
    html = client.get(f"/ui/{REPO}/runs/{local}").text
    assert "not run by GitHub Actions" in html
    assert "actions/runs" not in html
