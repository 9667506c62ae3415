"""The culprit through the service: injected breaks on main with some commits never run, read
back from `GET .../culprit` on both engines, and the bisection's uploads narrowing the range."""

from __future__ import annotations

import random

import pytest
from fastapi.testclient import TestClient

from cpci import urls
from cpci.schema import ResultRecord
from cpci.schema.culprit import CulpritRange
from tests.builders import REPO, config, envelope, record, sha, upload

BROKE = "AssertionError: out differs from the reference"
COMMITS = 24


def record_chain(client: TestClient, n: int = COMMITS) -> None:
    """main's first-parent links sha(1) -> sha(0), ..., as the branch job's uploader sends."""
    parents = [{"commit": sha(k), "parent": sha(k - 1)} for k in range(1, n)]
    answer = client.post(urls.api_commits(REPO), json={"branch": "main", "parents": parents})
    assert answer.status_code == 200, answer.text


def results(k: int, broken_from: int) -> list[ResultRecord]:
    """`victim` fails 3 attempts from commit `broken_from` on; `stable` always passes."""
    out = [record("stable")]
    if k >= broken_from:
        out += [record("victim", "failed", attempt=a, message=BROKE) for a in (1, 2, 3)]
    else:
        out.append(record("victim"))
    return out


def run_at(client: TestClient, k: int, broken_from: int, run_id: int | None = None) -> None:
    run = str(run_id if run_id is not None else 100 + k)
    upload(client, envelope(results(k, broken_from), commit=sha(k), ci_run_id=run))


def culprit(client: TestClient, name: str = "victim", **query: str) -> CulpritRange:
    answer = client.get(urls.api_culprit(REPO, config(name), query.get("branch")))
    assert answer.status_code == 200, answer.text
    return CulpritRange.model_validate(answer.json())


@pytest.mark.parametrize("seed", range(4))
def test_injected_breaks_on_main_are_named_or_ranged(client: TestClient, seed: int) -> None:
    rng = random.Random(seed)
    record_chain(client)
    start = rng.randrange(12, COMMITS - 2)
    ran = sorted({k for k in range(COMMITS) if rng.random() < 0.5} | set(range(10)))
    ran = sorted(set(ran) | {COMMITS - 1})
    for k in ran:
        run_at(client, k, start)
    found = culprit(client)
    good = max(k for k in ran if k < start)
    bad = min(k for k in ran if k >= start)
    assert found.status == "broken", found.reason
    assert (found.tip, found.last_good, found.first_bad) == (sha(COMMITS - 1), sha(good), sha(bad))
    assert found.untested == [sha(k) for k in range(good + 1, bad)]
    assert sha(start) in found.suspects
    assert found.culprit == (sha(bad) if bad == good + 1 else None)
    assert culprit(client, "stable").status == "passing"


def test_bisection_runs_narrow_the_range_to_the_culprit(client: TestClient) -> None:
    """Each dispatched run uploads the config at the midpoint on main (after the tip's run):
    the range halves each time and ends at the injected culprit."""
    record_chain(client)
    start = 17
    for k in [*range(10), COMMITS - 1]:
        run_at(client, k, start)
    found = culprit(client)
    assert len(found.suspects) == COMMITS - 1 - 10 + 1
    runs = 0
    while (mid := found.midpoint()) is not None:
        run_at(client, int(mid, 16), start, run_id=900 + runs)
        runs += 1
        found = culprit(client)
        assert found.tip == sha(COMMITS - 1)
    assert found.culprit == sha(start)
    assert runs <= 4


def test_a_flaky_failure_names_no_commit_and_untrusted_branches_are_refused(
    client: TestClient,
) -> None:
    record_chain(client)
    for k in range(COMMITS):
        flaked = k % 5 == 0 or k == COMMITS - 1
        upload(
            client,
            envelope(
                [record("victim", "failed", message=BROKE) if flaked else record("victim")],
                commit=sha(k),
                ci_run_id=str(100 + k),
            ),
        )
    found = culprit(client)
    assert found.status == "undecided", found.reason
    assert found.midpoint() is None
    refused = client.get(urls.api_culprit(REPO, config("victim"), "wip"))
    assert refused.status_code == 403
    assert "not a trusted branch" in refused.text
    assert client.get(urls.api_culprit(REPO, config("nobody"))).status_code == 404
