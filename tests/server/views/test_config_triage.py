"""The config page's triage and the dashboard's "broken since", read through their JSON twins
on both engines: an injected break on main with commits never run between, a quarantine with
the passes its release needs, and the polluters the runner's bisection named."""

from __future__ import annotations

from fastapi.testclient import TestClient

from cpci import urls
from cpci.schema import OrderDependence, ResultRecord
from cpci.server.views.read_models import ConfigOverview, Dashboard
from tests.builders import REPO, config, envelope, nodeid, record, sha, upload

BROKE = "AssertionError: out differs from the reference"
COMMITS, BROKEN_FROM = 16, 11
#: Commits main ran; 9 and 10 (between the last good and the first bad) never ran.
RAN = [*range(9), 11, 12, 13, 14, 15]


def order_dependent(polluters: list[str]) -> ResultRecord:
    return record(
        "shy",
        "failed",
        message="order-dependent: passes alone",
        isolation="order-dependent",
        order_dependence=OrderDependence(polluters=polluters, replays=4, searched=9),
    )


def results(k: int) -> list[ResultRecord]:
    """`victim` fails 3 attempts from BROKEN_FROM on; `stable` always passes; `shy` fails
    after `p2p` twice and after `a2a` and `ring` together once."""
    out = [record("stable")]
    if k >= BROKEN_FROM:
        out += [record("victim", "failed", attempt=a, message=BROKE) for a in (1, 2, 3)]
    else:
        out.append(record("victim"))
    if k in (3, 12):
        out.append(order_dependent([nodeid("p2p")]))
    elif k == 14:
        out.append(order_dependent([nodeid("a2a"), nodeid("ring")]))
    else:
        out.append(record("shy"))
    return out


def seed(client: TestClient) -> None:
    parents = [{"commit": sha(k), "parent": sha(k - 1)} for k in range(1, COMMITS)]
    recorded = client.post(urls.api_commits(REPO), json={"branch": "main", "parents": parents})
    assert recorded.status_code == 200, recorded.text
    for k in RAN:
        upload(client, envelope(results(k), commit=sha(k), ci_run_id=str(100 + k)))


def overview(client: TestClient, name: str) -> ConfigOverview:
    answer = client.get(urls.api_config(REPO, config(name)))
    assert answer.status_code == 200, answer.text
    return ConfigOverview.model_validate(answer.json())


def test_the_config_page_shows_its_range_quarantine_and_polluters(client: TestClient) -> None:
    seed(client)
    added = client.post(
        urls.api_quarantines(REPO), json={"config": config("victim"), "reason": "#42"}
    )
    assert added.status_code == 201, added.text

    triage = overview(client, "victim").triage
    assert triage is not None
    assert triage.branch == "main"
    assert triage.culprit is not None
    assert triage.culprit.status == "broken", triage.culprit.reason
    assert (triage.culprit.last_good, triage.culprit.first_bad) == (sha(8), sha(11))
    assert triage.culprit.untested == [sha(9), sha(10)]
    assert triage.quarantine is not None
    assert (triage.quarantine.reason, triage.quarantine.by[:6]) == ("#42", "token:")
    assert triage.quarantine.passes_to_release > 0
    assert triage.order_dependence == []

    shy = overview(client, "shy").triage
    assert shy is not None
    assert shy.quarantine is None
    assert [(p.polluters, p.count) for p in shy.order_dependence] == [
        ([nodeid("p2p")], 2),
        ([nodeid("a2a"), nodeid("ring")], 1),
    ]
    assert shy.order_dependence[0].text == f"fails after {nodeid('p2p')}"
    assert "together" in shy.order_dependence[1].text
    assert shy.order_dependence_runs == ["114", "112", "103"]

    stable = overview(client, "stable").triage
    assert stable is not None
    assert stable.culprit is not None
    assert stable.culprit.status == "passing"


def test_the_dashboard_says_broken_since_for_a_break_not_a_flake(client: TestClient) -> None:
    seed(client)
    answer = client.get(urls.api_dashboard(REPO))
    assert answer.status_code == 200, answer.text
    page = Dashboard.model_validate(answer.json())
    [broken] = page.broken  # victim only: stable and shy pass at the tip
    assert broken.config == config("victim")
    assert (broken.first_bad, broken.last_good, broken.untested) == (sha(11), sha(8), 2)
    assert broken.culprit is None  # 9, 10 or 11
    assert broken.page_url == urls.config(REPO, config("victim"))

    other = client.get(urls.api_dashboard(REPO) + "?branch=feature")
    assert other.status_code == 200
    assert Dashboard.model_validate(other.json()).broken == []  # an untrusted branch's
