"""The grid's twin on both engines: a row per config, a cell per commit (newest first), each
row's verdict against its result before, and the filters and pages a reader narrows it with."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from fastapi.testclient import TestClient

from cpci.schema import Outcome, ResultRecord
from cpci.server.views.grid import row_verdict
from cpci.server.views.read_models import GridState
from tests.builders import REPO, config, envelope, record, sha, upload

API = f"/api/v1/repos/{REPO}/grid"

#: Each config's outcome per main commit, oldest first ("" where it did not run).
HISTORY: dict[str, tuple[Outcome | Literal[""], ...]] = {
    "steady": ("passed", "passed", "passed", "passed"),
    "regressed": ("passed", "passed", "passed", "failed"),
    "broken": ("passed", "failed", "failed", "failed"),
    "fixed": ("failed", "failed", "failed", "passed"),
    "newcomer": ("", "", "", "failed"),
    "skipper": ("passed", "passed", "passed", "skipped"),
}
PARAMS = {"steady": {"dtype": "bf16", "cp": 2}, "regressed": {"dtype": "fp32", "cp": 2}}
STATE = {"passed": "pass", "failed": "fail", "skipped": "skip", "": ""}


def _record(name: str, outcome: Outcome, **fields: Any) -> ResultRecord:
    message = "boom" if outcome == "failed" else None
    return record(name, outcome, message=message, params=PARAMS.get(name, {}), **fields)


def seed(client: TestClient) -> None:
    for n in range(4):
        results = [_record(name, o) for name, h in HISTORY.items() if (o := h[n])]
        upload(client, envelope(results, commit=sha(n + 1), ci_run_id=str(n + 1)))
    # "flip" fails then passes on a rerun at the newest commit: passed and failed there.
    rerun = [_record("flip", "failed"), _record("flip", "passed", attempt=2, flaky=True)]
    upload(client, envelope(rerun, commit=sha(4), ci_run_id="4b"))
    # A pull request's run never enters the branch's grid.
    pr = envelope([_record("steady", "failed")], commit="c" * 40, pull_request=9, branch="x")
    upload(client, pr)


def rows(client: TestClient, **params: Any) -> dict[str, dict[str, Any]]:
    answer = client.get(API, params=params)
    assert answer.status_code == 200, answer.text
    return {r["config"]: r for r in answer.json()["rows"]}


def test_a_row_per_config_a_cell_per_commit_newest_first(client: TestClient) -> None:
    seed(client)
    data = client.get(API).json()
    assert data["branch"] == "main"
    assert [c["commit"] for c in data["columns"]] == [sha(n) for n in (4, 3, 2, 1)]
    found = {r["config"]: r for r in data["rows"]}
    for name, history in HISTORY.items():
        assert found[config(name)]["cells"] == [STATE[o] for o in reversed(history)], name
    assert found[config("flip")]["cells"] == ["mixed", "", "", ""]
    assert found[config("steady")]["params"] == {"dtype": "bf16", "cp": 2}
    assert data["configs"] == data["matching"] == len(HISTORY) + 1


def test_each_row_has_the_verdict_of_its_newest_result_against_the_one_before(
    client: TestClient,
) -> None:
    seed(client)
    data = client.get(API).json()
    verdicts = {r["config"]: r["verdict"] for r in data["rows"]}
    assert verdicts == {
        config("steady"): "passed",
        config("regressed"): "new_failure",
        config("broken"): "broken",
        config("fixed"): "fixed",
        config("newcomer"): "no_baseline",
        config("skipper"): "skipped",
        config("flip"): "flaky",
    }
    # Worst first: what broke last, then what stays broken, ... then what passes.
    assert [r["verdict"] for r in data["rows"]][:3] == ["new_failure", "broken", "flaky"]
    broken = next(r for r in data["rows"] if r["verdict"] == "broken")
    assert (broken["broken_since"], broken["broken_before_window"]) == (sha(2), False)
    assert broken["broken_since_url"] == f"/ui/{REPO}/runs/2"
    assert (
        f'since <a href="/ui/{REPO}/runs/2">{sha(2)[:7]}</a>' in client.get(f"/ui/{REPO}/grid").text
    )
    assert data["verdicts"]["passed"] == 1
    # Two columns: the broken streak reaches the oldest one, so it began there or before.
    two = {r["config"]: r for r in client.get(API, params={"commits": 2}).json()["rows"]}
    assert (
        two[config("broken")]["broken_since"],
        two[config("broken")]["broken_before_window"],
    ) == (sha(3), True)


def test_filters_by_name_parameter_cell_and_verdict(client: TestClient) -> None:
    seed(client)
    assert set(rows(client, q="REG")) == {config("regressed")}  # any case
    assert set(rows(client, param="cp=2")) == {config("steady"), config("regressed")}
    assert set(rows(client, param="dtype=bf16 cp=2")) == {config("steady")}
    assert set(rows(client, param="nothing=here")) == set()
    failed_somewhere = {config(n) for n in ("regressed", "broken", "fixed", "newcomer")}
    assert set(rows(client, outcome="fail")) == failed_somewhere
    assert set(rows(client, outcome="mixed")) == {config("flip")}
    chosen = rows(client, verdict=["new_failure", "fixed"])
    assert set(chosen) == {config("regressed"), config("fixed")}
    assert set(rows(client, verdict="broken", q="fixed")) == set()
    assert client.get(API, params={"verdict": "nonsense"}).status_code == 422


def test_pages_hold_per_page_rows_in_the_same_order(client: TestClient) -> None:
    seed(client)
    whole = [r["config"] for r in client.get(API).json()["rows"]]
    first = client.get(API, params={"per_page": 4}).json()
    second = client.get(API, params={"per_page": 4, "page": 2}).json()
    assert (first["pages"], first["matching"]) == (2, len(whole))
    assert [r["config"] for r in first["rows"] + second["rows"]] == whole


def test_a_quarantined_config_is_marked_and_filtered(client: TestClient) -> None:
    seed(client)
    body = {"config": config("broken"), "reason": "tracked in #12"}
    assert client.post(f"/api/v1/repos/{REPO}/quarantines", json=body).status_code == 201
    marked = rows(client, verdict="quarantined")
    assert set(marked) == {config("broken")}
    assert marked[config("broken")]["quarantined"] == "tracked in #12"
    assert marked[config("broken")]["verdict"] == "broken"  # still what it did
    html = client.get(f"/ui/{REPO}/grid").text
    assert 'title="tracked in #12">' in html


@pytest.mark.parametrize(
    ("states", "flaky", "verdict", "since"),
    [
        (["fail", "pass"], False, "new_failure", None),
        (["fail", "", "pass"], False, "new_failure", None),  # a commit it skipped says nothing
        (["fail", "fail", "", "fail", "pass"], False, "broken", 3),
        (["fail", "mixed"], False, "broken", 1),
        (["fail", "fail"], True, "flaky", None),  # its history labels it flaky
        (["mixed", "pass"], False, "flaky", None),
        (["fail"], False, "no_baseline", None),
        (["", "pass", "fail"], False, "fixed", None),
        (["pass", "pass"], True, "passed", None),
        (["skip", "fail"], False, "skipped", None),
    ],
)
def test_row_verdict(states: list[GridState], flaky: bool, verdict: str, since: int | None) -> None:
    assert row_verdict(states, flaky) == (verdict, since)
