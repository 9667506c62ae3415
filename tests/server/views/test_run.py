"""A run counts each config by its final record, what it came to, and its reruns apart: the
demo's PR run showed "7 failed" for 2 configs failing 3 of 3 attempts and 1 passing on its
rerun."""

from __future__ import annotations

from fastapi.testclient import TestClient

from cpci.schema import Outcome, ResultRecord
from tests.builders import REPO, config, envelope, record, upload


def attempts(name: str, *outcomes: Outcome) -> list[ResultRecord]:
    """One config's records in one upload, as the runner writes them with reruns on."""
    out = []
    for n, outcome in enumerate(outcomes, start=1):
        flaky = outcome == "passed" and n > 1
        message = f"AssertionError: {name} attempt {n}" if outcome != "passed" else None
        out.append(record(name, outcome, attempt=n, flaky=flaky, message=message))
    return out


def seed(client: TestClient) -> None:
    results = [
        *attempts("broken1", "failed", "failed", "failed"),
        *attempts("broken2", "failed", "failed", "failed"),
        *attempts("flaky", "failed", "passed"),
        *attempts("ok", "passed"),
    ]
    upload(client, envelope(results, ci_run_id="7"))


def test_the_run_summary_counts_configs_by_their_final_record(client: TestClient) -> None:
    seed(client)
    summary = client.get(f"/api/v1/repos/{REPO}/runs/7").json()
    assert summary["configs"] == 4
    assert summary["outcomes"] == {"failed": 2, "passed": 2}
    assert summary["flaky"] == 1
    assert summary["reruns"] == {"failed": 4, "passed": 1}
    assert summary["result_outcomes"] == {"failed": 7, "passed": 2}
    failing = [(f["config"], f["outcome"], f["message"]) for f in summary["failing"]]
    assert failing == [  # the flaky config passed: not failing; the message is the final's
        (config("broken1"), "failed", "AssertionError: broken1 attempt 3"),
        (config("broken2"), "failed", "AssertionError: broken2 attempt 3"),
    ]


def test_the_run_page_counts_configs_and_lists_every_attempt(client: TestClient) -> None:
    seed(client)
    detail = client.get(f"/api/v1/repos/{REPO}/runs/7/detail").json()
    assert (detail["outcomes"], detail["flaky"]) == ({"failed": 2, "passed": 2}, 1)
    (shard,) = detail["shards"]
    assert (shard["outcomes"], shard["results"], shard["reruns"]) == (
        {"failed": 2, "passed": 2},
        9,
        5,
    )
    assert detail["matching"] == 9  # the results table lists every attempt
    failed = client.get(f"/api/v1/repos/{REPO}/runs/7/detail", params={"outcome": "failed"})
    assert failed.json()["matching"] == detail["result_outcomes"]["failed"] == 7
    page = client.get(f"/ui/{REPO}/runs/7")
    assert page.status_code == 200
    counts = page.text.split('<p id="counts">', 1)[1].split("</p>", 1)[0]
    assert '<span class="count failed">2 failed</span>' in counts
    assert '<span class="count passed">2 passed</span>' in counts
    assert "(1 flaky)" in counts
    assert "reruns: " in counts
    assert '<span class="count failed">4 failed</span>' in counts  # the reruns'
    assert "7 failed" not in page.text.split('id="filter"', 1)[0]
    assert "failed (7)" in page.text  # the filter counts the results it filters
