"""The evidence summary the runner fetches before a run, through the service on both engines:
each config's base-branch record, label, runs and quarantine, from trusted runs only."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session

from cpci import urls
from cpci.evidence import signature
from cpci.schema import EvidenceSummary, ResultRecord
from cpci.server.crud.tokens import create_token
from tests.builders import REPO, config, envelope, record, sha, upload
from tests.server.databases import ClientFactory

FLAKE = "AssertionError: max abs err 0.{n} > 0.01"


def main_run(client: TestClient, n: int, results: list[ResultRecord]) -> None:
    upload(client, envelope(results, commit=sha(n), ci_run_id=str(100 + n)))


def twelve_main_runs(client: TestClient) -> None:
    """`stable` passes 12 times; `flaky` fails at runs 3 and 8 (passing between) and flakes
    (fails, then passes on its rerun) at run 10."""
    for n in range(12):
        results = [record("stable")]
        if n in (3, 8):
            results.append(record("flaky", "failed", message=FLAKE.format(n=n)))
        elif n == 10:
            results += [
                record("flaky", "failed", message=FLAKE.format(n=n)),
                record("flaky", attempt=2, flaky=True),
            ]
        else:
            results.append(record("flaky"))
        main_run(client, n, results)


def summary(client: TestClient, branch: str | None = None) -> EvidenceSummary:
    answer = client.get(urls.api_evidence(REPO, branch))
    assert answer.status_code == 200, answer.text
    return EvidenceSummary.model_validate(answer.json())


def test_each_config_has_its_branch_record_and_label(client: TestClient) -> None:
    twelve_main_runs(client)
    found = summary(client)
    assert (found.branch, found.runs, found.newest_commit) == ("main", 12, sha(11))
    assert (found.threshold, found.level) == (0.2, 0.95)
    stable, flaky = found.entry(config("stable")), found.entry(config("flaky"))
    assert stable is not None
    assert flaky is not None
    assert (stable.record.failures, stable.record.trials, stable.flaky, stable.runs) == (
        0,
        12,
        False,
        12,
    )
    # Three failing attempts (the rerun's pass counts the one it hid) of 13 attempts.
    assert (flaky.record.failures, flaky.record.trials, flaky.flaky, flaky.runs) == (
        3,
        13,
        True,
        12,
    )
    assert flaky.record.signatures == {signature(FLAKE.format(n=3)): 3}
    assert flaky.quarantine is None
    assert found.entry(config("never-ran-here")) is None


def test_a_prs_runs_and_an_untrusted_branchs_never_count(client: TestClient) -> None:
    twelve_main_runs(client)
    failing = [record("stable", "failed", message="AssertionError: broke")]
    upload(client, envelope(failing, commit=sha(50), ci_run_id="500", branch="wip"))
    pr = envelope(
        [*failing, record("brand-new")],
        commit=sha(51),
        ci_run_id="501",
        branch="feature",
        pull_request=7,
        base_commit=sha(11),
    )
    upload(client, pr)
    found = summary(client)
    stable = found.entry(config("stable"))
    assert stable is not None
    assert (stable.record.failures, stable.flaky) == (0, False)
    assert found.entry(config("brand-new")) is None  # new to main: its arrival runs are due
    refused = client.get(urls.api_evidence(REPO, "wip"))
    assert refused.status_code == 403
    assert "CPCI_TRUSTED_BRANCHES" in refused.json()["detail"]


def test_a_quarantined_config_says_so_even_before_it_ran(client: TestClient) -> None:
    main_run(client, 0, [record("stable")])
    for key in (config("stable"), config("not-yet")):
        added = client.post(urls.api_quarantines(REPO), json={"config": key, "reason": "#1234"})
        assert added.status_code == 201, added.text
    found = summary(client)
    for key, runs in ((config("stable"), 1), (config("not-yet"), 0)):
        entry = found.entry(key)
        assert entry is not None
        assert entry.runs == runs
        assert entry.quarantine is not None
        assert (entry.quarantine.reason, entry.quarantine.by[:6]) == ("#1234", "token:")


def test_reads_need_a_token_where_the_service_says_so(
    make_client: ClientFactory, engine: Engine
) -> None:
    client = make_client(read_access="token")
    assert client.get(urls.api_evidence(REPO)).status_code == 401
    with Session(engine) as session:
        token = create_token(session=session, repository=REPO, name="reader", scope="pr").token
        session.commit()
    client.headers["Authorization"] = f"Bearer {token}"
    answer = client.get(urls.api_evidence(REPO))
    assert answer.status_code == 200, answer.text
    assert EvidenceSummary.model_validate(answer.json()).configs == {}


@pytest.mark.parametrize("branch", ["", "x" * 256])
def test_a_branch_out_of_bounds_is_refused(client: TestClient, branch: str) -> None:
    main_run(client, 0, [record()])
    assert client.get(urls.api_evidence(REPO, branch)).status_code == 422
