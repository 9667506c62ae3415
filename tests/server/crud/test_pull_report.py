"""PR verdicts through the real service (uvicorn on 127.0.0.1, both engines): uploads as the
runner and the Action send them, then the PR report, the flaky list and the dashboard read back.

Each test seeds a main history, then a PR, and checks the verdict the issue asked for: a known
flake failing every attempt is a NEW FAILURE, another PR's upload hides nothing, a never-ran
config is INFRA, an order-dependent one fails, a segfault next to a peer's NCCL error is the
PR's, matrix legs are judged apart, and the dashboard says what the report says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from cpci.schema import Outcome, ResultRecord
from cpci.server import Settings, create_app
from tests.builders import REPO, config, envelope, record, replaced, sha, upload
from tests.live_server import serve

API = f"/api/v1/repos/{REPO}"
BASE_RUNS = 30
#: A config that fails on main about one run in three (10 of 30), always the same way.
FLAKY_RUNS = "PPFPPFPPFP" * 3
FLAKY_ERROR = "AssertionError: max abs err 4.1e-02 > 1e-03 at step 17"


@pytest.fixture
def http(engine: Engine, db_url: str, token: str) -> Iterator[httpx.Client]:
    """REPO's branch token against a real uvicorn serving this test's database."""
    app = create_app(Settings(database_url=db_url), engine=engine)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def seed_main(http: httpx.Client, leg: str = "") -> None:
    """BASE_RUNS branch runs of main: `stable` always passes, `flaky` fails as FLAKY_RUNS says."""
    for n in range(1, BASE_RUNS + 1):
        flaky = (
            record("flaky", "failed", message=FLAKY_ERROR.replace("4.1", str(n)))
            if FLAKY_RUNS[n - 1] == "F"
            else record("flaky")
        )
        results = [record("stable"), record("other"), flaky]
        extra = {"leg": leg} if leg else {}
        upload(http, envelope(results, commit=sha(n), ci_run_id=str(n), **extra))


def attempts(name: str, outcome: Outcome, message: str, k: int = 3) -> list[ResultRecord]:
    """The runner's record of a config that failed its first run and both reruns."""
    return [record(name, outcome, message=message, attempt=a) for a in range(1, k + 1)]


def rerun_flake(name: str, message: str) -> list[ResultRecord]:
    """Failed once, passed on the rerun: the pass is recorded as flaky."""
    return [record(name, "failed", message=message), record(name, attempt=2, flaky=True)]


def pr(http: httpx.Client, number: int, results: list[ResultRecord], **fields: Any) -> None:
    head = {"commit": f"{number:x}" * 8, "branch": f"pr-{number}", "pull_request": number}
    body = envelope(results, base_commit=sha(BASE_RUNS), **{"ci_run_id": f"pr{number}", **head})
    upload(http, replaced(body, **fields))


def report(http: httpx.Client, number: int) -> dict[str, Any]:
    response = http.get(f"{API}/pulls/{number}/report")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def verdicts(data: dict[str, Any]) -> dict[str, str]:
    sections = ("new_failures", "broken_at_base", "flaky", "infra", "no_baseline", "fixed")
    return {entry["config"]: entry["verdict"] for s in sections for entry in data[s]}


def entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        e for s in ("new_failures", "flaky", "infra", "broken_at_base") for e in data[s]
    ]
    (one,) = [e for e in found if e["config"] == config(name)]
    return one


def test_a_known_flake_failing_every_attempt_is_a_new_failure(http: httpx.Client) -> None:
    seed_main(http)
    pr(http, 5, attempts("flaky", "failed", FLAKY_ERROR.replace("4.1", "9.9")))
    data = report(http, 5)
    flaky = entry(data, "flaky")
    assert flaky["verdict"] == "new_failure", flaky["reason"]
    evidence = flaky["evidence"]
    assert (evidence["failed_attempts"], evidence["history_failures"]) == (3, 9)
    assert evidence["chance"] < evidence["threshold"]
    assert "failed 3/3 attempts; known flaky rate <=" in flaky["reason"]
    # One failed attempt with its usual signature stays a flake.
    pr(http, 6, [record("flaky", "failed", message=FLAKY_ERROR.replace("4.1", "7.0"))])
    assert entry(report(http, 6), "flaky")["verdict"] == "flaky"


def test_another_prs_upload_hides_nothing(http: httpx.Client) -> None:
    seed_main(http)
    # PR 7 sees `stable` fail, then pass on a rerun, three times over: to PR 7 it is flaky.
    for run in range(3):
        pr(http, 7, rerun_flake("stable", "RuntimeError: NCCL hiccup"), ci_run_id=f"pr7-{run}")
    assert entry(report(http, 7), "stable")["verdict"] == "flaky"
    # PR 8 breaks `stable` for real: PR 7's evidence must not explain it away.
    pr(http, 8, attempts("stable", "failed", "AssertionError: wrong output"))
    assert entry(report(http, 8), "stable")["verdict"] == "new_failure"
    flaky_list = http.get(f"{API}/flaky").json()
    assert config("stable") not in [c["config"] for c in flaky_list["configs"]]
    assert config("flaky") in [c["config"] for c in flaky_list["configs"]]


def test_never_ran_order_dependent_and_segfault_verdicts(http: httpx.Client) -> None:
    seed_main(http)
    segfault = [
        {"rank": 1, "phase": "call", "message": "Fatal Python error: Segmentation fault"},
        {"rank": 0, "phase": "call", "message": "NCCL error in: x.cpp:1, remote process exited"},
    ]
    note = (
        "ORDER-DEPENDENT: passes alone, but fails again after the configs that ran before it in "
        f"its world: {config('stable')[:-2]}"
    )
    results = [
        record(
            "stable",
            "not_run",
            rank_errors=[
                {"rank": -1, "phase": "world", "message": "not run: world did not come up"}
            ],
        ),
        record("other", "failed", message="AssertionError: depends on state", attempt=1),
        record("other", attempt=2),
        record(
            "other",
            "failed",
            isolation="order-dependent",
            attempt=3,
            rank_errors=[{"rank": -1, "phase": "world", "message": note}],
        ),
        *[record("flaky", "crashed", rank_errors=segfault, attempt=a) for a in (1, 2, 3)],
    ]
    pr(http, 9, results)
    data = report(http, 9)
    assert verdicts(data) == {
        config("stable"): "infra",
        config("other"): "new_failure",
        config("flaky"): "new_failure",
    }
    assert entry(data, "stable")["reason"] == "not run: world did not come up"
    assert entry(data, "other")["reason"] == (
        f"order-dependent: fails after {config('stable')[:-2]}; passes alone"
    )
    crash = entry(data, "flaky")
    assert crash["message"] == "Fatal Python error: Segmentation fault"
    assert crash["infra_rule"] is None


def test_matrix_legs_are_judged_against_the_same_leg(http: httpx.Client) -> None:
    seed_main(http, leg="h100")
    for n in (BASE_RUNS,):  # the base also ran on an A100 leg
        results = [record("stable"), record("other"), record("flaky")]
        upload(http, envelope(results, commit=sha(n), ci_run_id=str(n), leg="a100"))
    results_h100 = [record("stable"), record("other"), record("flaky")]
    results_a100 = [record("stable"), *attempts("other", "failed", "AssertionError: A100 only")]
    pr(http, 11, results_h100, leg="h100")
    pr(http, 11, results_a100, leg="a100")
    data = report(http, 11)
    (new,) = data["new_failures"]
    assert (new["config"], new["leg"]) == (config("other"), "a100")
    assert data["counts"]["configs"] == 3
    assert data["counts"]["results"] == 3 + 1 + 3
    assert data["counts"]["by_verdict"] == {"new_failure": 1, "passed": 4}


def test_the_dashboard_says_what_the_report_says(http: httpx.Client) -> None:
    seed_main(http)
    results = [
        *attempts("stable", "failed", "AssertionError: broken by this PR"),
        *attempts("other", "crashed", "Fatal Python error: Aborted"),
        *rerun_flake("flaky", FLAKY_ERROR),
    ]
    pr(http, 12, results)
    data = report(http, 12)
    assert data["counts"]["by_verdict"] == {"flaky": 1, "new_failure": 2}
    (pull,) = http.get(f"{API}/dashboard").json()["pulls"]
    assert pull["by_verdict"] == data["counts"]["by_verdict"]
    assert (pull["verdict"], pull["summary"]) == ("new_failures", "2 new failure(s), 1 flaky")
    assert pull["failing"] == 3
    html = http.get(f"/ui/{REPO}").text
    assert "2 new failure(s), 1 flaky" in html


def test_timings_are_compared_with_the_same_leg(http: httpx.Client) -> None:
    """An A100 leg three times slower than the H100 one is no duration regression."""
    for n in range(1, 6):
        for leg, seconds in (("h100", 1.0), ("a100", 3.0)):
            body = envelope([record("stable", duration_s=seconds)], commit=sha(n), leg=leg)
            upload(http, replaced(body, ci_run_id=str(n)))
    head = {"base_commit": sha(5), "commit": "e" * 40, "pull_request": 13, "branch": "pr-13"}
    for leg, seconds in (("h100", 1.0), ("a100", 3.05)):
        upload(http, envelope([record("stable", duration_s=seconds)], leg=leg, **head))
    assert report(http, 13)["duration_regressions"] == []
    head = {**head, "commit": "d" * 40, "ci_run_id": "pr13b"}
    for leg in ("h100", "a100"):
        upload(http, envelope([record("stable", duration_s=3.0)], leg=leg, **head))
    (slow,) = report(http, 13)["duration_regressions"]
    assert slow["shift"]["baseline_median"] == 1.0
