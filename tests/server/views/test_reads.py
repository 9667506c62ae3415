"""Reading results over the API on both engines: history pages, run summaries, the flaky list
and the PR report with every verdict, built from uploads as the runner would send them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.schema import RunEnvelope, UploadReceipt
from cpci.server.crud.history import observations
from cpci.server.models import Config, EnvironmentFingerprint
from cpci.urls import Links
from tests.builders import HEAD, REPO, config, envelope, record, replaced, sha, upload

MAIN_RUNS = 12
FLAKY = "FPFPFPFPFPFP"  # on main, one letter per run


def seed_main(client: TestClient) -> None:
    """Twelve runs of main, one commit each; the last one (sha(12)) is the PRs' base."""
    for n in range(1, MAIN_RUNS + 1):
        results = [
            record("stable", duration_s=1.0 + 0.01 * (n % 3), metrics={"max_abs_err": 1e-4}),
            record("flaky", "passed" if FLAKY[n - 1] == "P" else "failed"),
            record("broken", "failed", message="AssertionError: out of tolerance"),
            record("fixed", "failed"),
            record("new"),
            record("infra"),
            record("slow", duration_s=1.0 + 0.01 * (n % 2)),
        ]
        upload(client, envelope(results, commit=sha(n), ci_run_id=str(n)))


def pr_shards(pr: int = 7, base: str = sha(MAIN_RUNS), run: str = "200") -> list[RunEnvelope]:
    common = {
        "commit": HEAD,
        "branch": "feature",
        "pull_request": pr,
        "base_commit": base,
        "ci_run_id": run,
        "shard_total": 2,
    }
    return [
        envelope(
            [
                record("stable", metrics={"max_abs_err": 5e-3}),
                record("flaky", "failed"),
                record("broken", "failed"),
                record("fixed"),
            ],
            shard_index=0,
            **common,
        ),
        envelope(
            [
                record("new", "failed", message="AssertionError: max abs err 3e-2 > 1e-3"),
                record(
                    "infra",
                    "crashed",
                    message="[Rank 1] Watchdog caught collective operation timeout",
                ),
                record("slow", duration_s=3.0),
                record("brandnew", "failed"),
            ],
            shard_index=1,
            **common,
        ),
    ]


def names(section: list[dict[str, Any]]) -> list[str]:
    return [entry["config"] for entry in section]


def report(client: TestClient, pr: int = 7) -> dict[str, Any]:
    response = client.get(f"/api/v1/repos/{REPO}/pulls/{pr}/report")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_pr_report_is_pending_until_every_shard_is_in_then_gives_verdicts(
    client: TestClient,
) -> None:
    seed_main(client)
    first, second = pr_shards()
    upload(client, first)
    pending = report(client)
    assert pending["status"] == "pending"
    assert pending["shards"]["text"] == "1/2 shards reported"
    assert pending["summary"].startswith("pending: 1/2 shards reported")
    assert len(pending["pending"]) == 4
    assert pending["new_failures"] == pending["flaky"] == pending["duration_regressions"] == []

    upload(client, second)
    done = report(client)
    assert done["status"] == "complete"
    assert done["baseline"]["used_commit"] == sha(MAIN_RUNS)
    assert done["baseline"]["commits_behind"] == 0
    assert names(done["new_failures"]) == [config("new")]
    assert done["new_failures"][0]["message"] == "AssertionError: max abs err 3e-2 > 1e-3"
    assert done["new_failures"][0]["ranks"] == [0]  # which rank reported it
    assert names(done["broken_at_base"]) == [config("broken")]
    assert names(done["flaky"]) == [config("flaky")]
    evidence = done["flaky"][0]["flakiness"]
    assert evidence["flaky"]
    assert evidence["runs"] == MAIN_RUNS
    assert evidence["failing_runs"]
    assert names(done["infra"]) == [config("infra")]
    assert done["infra"][0]["infra_rule"] == "nccl-watchdog"
    assert names(done["fixed"]) == [config("fixed")]
    assert names(done["no_baseline"]) == [config("brandnew")]
    assert [f["config"] for f in done["duration_regressions"]] == [config("slow")]
    drift = done["metric_drift"]
    assert [(d["config"], d["shift"]["name"], d["shift"]["direction"]) for d in drift] == [
        (config("stable"), "max_abs_err", "up")
    ]
    assert done["counts"] == {
        "configs": 8,
        "results": 8,
        "by_verdict": {
            "broken_at_base": 1,
            "fixed": 1,
            "flaky": 1,
            "infra": 1,
            "new_failure": 1,
            "no_baseline": 1,
            "passed": 2,
        },
    }
    # The link people follow is the config's page in the UI; its history is the JSON twin.
    page = client.get(done["new_failures"][0]["history_url"])
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    key = done["new_failures"][0]["config"]
    history = client.get(f"/api/v1/repos/{REPO}/history", params={"config": key})
    assert history.json()["entries"][0]["outcome"] == "failed"


def test_rerun_attempt_that_passes_makes_the_config_flaky_not_passed(client: TestClient) -> None:
    seed_main(client)
    first, second = pr_shards()
    upload(client, first)
    upload(client, second)
    rerun = replaced(second, ci_attempt=2, results=[record("new")])
    upload(client, rerun)
    done = report(client)
    assert done["head_runs"][0]["ci_attempt"] == 2
    assert done["shards"]["text"] == "2/2 shards reported"
    assert config("new") in names(done["flaky"])
    assert done["new_failures"] == []


def test_a_rerun_of_the_base_run_reaches_reports_already_made(client: TestClient) -> None:
    """The baseline is read through a cache keyed by shard ids: a new attempt is a new key."""
    seed_main(client)
    for shard in pr_shards():
        upload(client, shard)
    assert names(report(client)["broken_at_base"]) == [config("broken")]
    rerun = envelope(
        [record("broken")], commit=sha(MAIN_RUNS), ci_run_id=str(MAIN_RUNS), ci_attempt=2
    )
    upload(client, rerun)
    done = report(client)
    assert done["broken_at_base"] == []
    flaky = {entry["config"]: entry["reason"] for entry in done["flaky"]}
    assert "passed and failed on the same commit" in flaky[config("broken")]


def test_untested_base_falls_back_to_a_known_ancestor(client: TestClient) -> None:
    seed_main(client)
    untested = sha(99)
    links = [{"commit": untested, "parent": sha(98)}, {"commit": sha(98), "parent": sha(12)}]
    response = client.post(
        f"/api/v1/repos/{REPO}/commits", json={"parents": links, "branch": "main"}
    )
    assert response.json() == {"recorded": 2}
    for shard in pr_shards(pr=8, base=untested, run="300"):
        upload(client, shard)
    done = report(client, 8)
    assert done["baseline"]["used_commit"] == sha(12)
    assert done["baseline"]["commits_behind"] == 2
    assert "used ancestor" in done["baseline"]["note"]
    assert names(done["new_failures"]) == [config("new")]


def test_no_baseline_at_all_says_so(client: TestClient) -> None:
    for shard in pr_shards(pr=9, base=sha(77), run="400"):
        upload(client, shard)
    done = report(client, 9)
    assert done["baseline"]["used_commit"] is None
    assert "no known ancestors" in done["baseline"]["note"]
    assert done["new_failures"] == []
    failing = {"new", "broken", "flaky", "brandnew"}
    assert set(names(done["no_baseline"])) == {config(n) for n in failing}
    assert "no known ancestors" in done["no_baseline"][0]["reason"]


def test_history_pages_newest_first_with_a_cursor(client: TestClient) -> None:
    seed_main(client)
    path = f"/api/v1/repos/{REPO}/history"
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"config": config("flaky"), "limit": 5}
        if cursor:
            params["before"] = cursor
        page = client.get(path, params=params).json()
        seen += [e["run"]["ci_run_id"] for e in page["entries"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [str(n) for n in range(MAIN_RUNS, 0, -1)]
    missing = client.get(path, params={"config": "nope@2"})
    assert missing.status_code == 404
    assert "NODEID@WORLD_SIZE" in missing.json()["detail"]


def test_observations_are_each_configs_latest_window_oldest_first(
    client: TestClient, engine: Engine
) -> None:
    seed_main(client)
    with Session(engine) as session:
        ids = dict(session.exec(select(Config.key, Config.id)).all())
        wanted = [ids[config("flaky")], ids[config("new")]]
        seen = observations(
            session=session,
            repo_name=REPO,
            config_pks=wanted,
            window=3,
            links=Links("https://github.com"),
            branch="main",
            exclude_commit=sha(MAIN_RUNS),
        )
    for pk in wanted:  # the newest three runs, leaving out the excluded commit's
        assert [o.run.ci_run_id for o in seen[pk]] == ["9", "10", "11"]
    assert [o.outcome for o in seen[ids[config("flaky")]]] == ["failed", "passed", "failed"]
    assert not seen[ids[config("flaky")]][0].on_pull_request


def test_run_summary_and_flaky_list(client: TestClient) -> None:
    seed_main(client)
    summary = client.get(f"/api/v1/repos/{REPO}/runs/{MAIN_RUNS}").json()
    assert summary["outcomes"] == {"failed": 2, "passed": 5}
    assert summary["environments"][0]["gpu"] == "H100"
    assert [f["config"] for f in summary["failing"]] == [config("broken"), config("fixed")]
    flaky = client.get(f"/api/v1/repos/{REPO}/flaky").json()
    assert [c["config"] for c in flaky["configs"]] == [config("flaky")]
    assert "6 separate stretch(es)" in flaky["configs"][0]["assessment"]["reason"]


def test_an_environment_stored_before_the_bounds_is_still_shown(
    client: TestClient, engine: Engine
) -> None:
    """SQLite kept whatever length was uploaded before the envelope bounded its environment:
    the run page and the config page show such a row as stored."""
    if engine.dialect.name != "sqlite":
        pytest.skip("only SQLite can hold a value longer than its column")
    upload(client, envelope([record("p2p")], ci_run_id="old-env"))
    long = "NVIDIA " + "H" * 300
    with Session(engine) as session:
        env = session.exec(select(EnvironmentFingerprint)).one()
        env.gpu = long
        session.add(env)
        session.commit()
    summary = client.get(f"/api/v1/repos/{REPO}/runs/old-env")
    assert summary.status_code == 200, summary.text
    assert summary.json()["environments"][0]["gpu"] == long
    overview = client.get(f"/api/v1/repos/{REPO}/config", params={"config": config("p2p")})
    assert overview.status_code == 200, overview.text
    assert overview.json()["environments"][0]["environment"]["gpu"] == long


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/repos/acme/none/runs/1",
        f"/api/v1/repos/{REPO}/pulls/1/report",
        f"/api/v1/repos/{REPO}/runs/404",
    ],
)
def test_unknown_things_are_404_with_a_hint(client: TestClient, path: str) -> None:
    upload(client, envelope([record("p2p")]))
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_openapi_documents_the_upload_body_and_routes(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/api/v1/uploads"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/RunEnvelope")
    assert "ResultRecord" in spec["components"]["schemas"]
    assert "/api/v1/repos/{owner}/{repo}/pulls/{number}/report" in spec["paths"]
    # The answers the uploader reads are the wire types it parses them into (cpci.schema).
    stored = spec["paths"]["/api/v1/uploads"]["post"]["responses"]["201"]["content"]
    assert stored["application/json"]["schema"]["$ref"].endswith("/UploadReceipt")
    receipt = spec["components"]["schemas"]["UploadReceipt"]
    assert set(receipt["properties"]) == set(UploadReceipt.model_fields)
    commits = spec["paths"]["/api/v1/repos/{owner}/{repo}/commits"]["post"]
    assert commits["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/Ancestry"
    )
    assert client.get("/healthz").json()["status"] == "ok"
