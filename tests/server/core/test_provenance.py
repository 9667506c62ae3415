"""Provenance over real HTTP: RSA-signed GitHub OIDC tokens (JWKS on loopback) and scoped upload
tokens against a real uvicorn; each claim rule (event, ref, run, commit) refuses with a 403
naming it and writes nothing, and the run page's JSON twin shows who uploaded the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from cpci import urls
from cpci.schema import RunEnvelope
from cpci.server.core.errors import Forbidden
from cpci.server.core.provenance import Credential, OidcClaims, check_upload
from cpci.server.crud.tokens import create_token
from cpci.server.models import Repository, Run
from tests.builders import BASE, REPO, envelope, record, send
from tests.server.oidc_keys import MERGE, REPO_ID, Keys, oidc_service, pull_request_claims

FORK_WORKFLOW = f"{REPO}/.github/workflows/cpci-fork-results.yml@refs/heads/main"


@pytest.fixture
def base_url(engine: Engine, db_url: str, keys: Keys) -> Iterator[str]:
    with oidc_service(
        db_url=db_url, keys=keys, engine=engine, oidc_fork_workflows=(FORK_WORKFLOW,)
    ) as url:
        yield url


def runs(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Run)).one()


def pr_run(number: int, **fields: Any) -> RunEnvelope:
    """A run of PR `number` as `cpci upload` sends it from a pull_request workflow: the head as
    commit, GitHub's merge commit (MERGE, the token's `sha`) as merge_commit."""
    body = {
        "commit": "c" * 40,
        "branch": "feature",
        "pull_request": number,
        "base_commit": BASE,
        "merge_commit": MERGE,
        **fields,
    }
    return envelope([record("p2p")], **body)


def test_a_push_to_main_uploads_main_and_the_run_page_says_who(
    base_url: str, keys: Keys, engine: Engine
) -> None:
    response = send(base_url, envelope([record("p2p")]), token=keys.token())
    assert response.status_code == 201, response.text
    detail = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/100/detail").json()
    assert detail["provenance"] == {
        "via": "oidc",
        "uploaded_by": f"repo:{REPO}:ref:refs/heads/main",
        "event": "push",
        "ref": "refs/heads/main",
        "workflow": f"{REPO}/.github/workflows/ci.yml@refs/heads/main",
        "fork": False,
    }
    page = httpx.get(base_url + urls.run(REPO, "100")).text
    assert "via OIDC · event push · ref <code>refs/heads/main</code>" in page


@pytest.mark.parametrize(
    ("claims", "body", "says"),
    [
        ({"ref": "refs/heads/feature"}, {}, "minted on ref 'refs/heads/feature'"),
        ({"event_name": "pull_request_target"}, {}, "must be uploaded from a push, schedule"),
        (pull_request_claims(7), {}, "this OIDC token is from event 'pull_request'"),
        (pull_request_claims(7), {"pull_request": 8}, "ref refs/pull/8/merge"),
        ({"event_name": "workflow_run"}, {"pull_request": 9}, "CPCI_OIDC_FORK_WORKFLOWS"),
    ],
    ids=["other-branch", "other-event", "pr-claims-branch", "other-pr", "unlisted-workflow"],
)
def test_an_oidc_token_claims_only_its_own_event_and_ref(
    base_url: str,
    keys: Keys,
    engine: Engine,
    claims: dict[str, Any],
    body: dict[str, Any],
    says: str,
) -> None:
    response = send(base_url, envelope([record("p2p")], **body), token=keys.token(**claims))
    assert response.status_code == 403, response.text
    assert says in response.json()["detail"]
    assert runs(engine) == 0


@pytest.mark.parametrize(
    ("claims", "body", "says"),
    [
        ({"sha": "d" * 40}, None, f"minted for commit {'d' * 40} (its `sha` claim"),
        ({"sha": None}, None, "nothing (the token has no `sha` claim)"),
        ({"run_id": "555"}, None, "comes from CI run 555 (its `run_id` claim)"),
        ({"run_attempt": "2"}, None, "attempt 2 of CI run 100 (its `run_attempt` claim)"),
        ({}, envelope([record("p2p")], ci_attempt=2), "but the upload claims ci_attempt 2"),
        (pull_request_claims(7), pr_run(7, merge_commit=None), "merge_commit is not given"),
        (
            pull_request_claims(7),
            pr_run(7, commit=MERGE, merge_commit=None),
            "merge commit of refs/pull/7/merge",
        ),
        (pull_request_claims(7, run_id="101"), pr_run(7), "comes from CI run 101"),
    ],
    ids=[
        "other-commit",
        "no-sha",
        "other-run",
        "other-attempt",
        "attempt-2-by-attempt-1",
        "pr-without-merge-commit",
        "pr-merge-commit-as-head",
        "pr-other-run",
    ],
)
def test_an_oidc_token_uploads_only_its_own_run_and_commit(
    base_url: str,
    keys: Keys,
    engine: Engine,
    claims: dict[str, Any],
    body: RunEnvelope | None,
    says: str,
) -> None:
    response = send(base_url, body or envelope([record("p2p")]), token=keys.token(**claims))
    assert response.status_code == 403, response.text
    assert says in response.json()["detail"]
    assert runs(engine) == 0


def test_a_pr_workflow_uploads_its_own_pr(base_url: str, keys: Keys) -> None:
    response = send(base_url, pr_run(7), token=keys.token(**pull_request_claims(7)))
    assert response.status_code == 201, response.text
    assert response.json()["ci_run_id"] == "100"
    detail = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/100/detail").json()
    assert detail["provenance"]["event"] == "pull_request"
    assert detail["provenance"]["fork"] is False


def test_the_allow_listed_fork_workflow_uploads_a_pr_marked_fork(
    base_url: str, keys: Keys, engine: Engine
) -> None:
    # Its own run, attempt and commit (the base repository's) are not the fork PR's it uploads.
    fork = keys.token(
        event_name="workflow_run",
        sub=f"repo:{REPO}:ref:refs/heads/main",
        job_workflow_ref=FORK_WORKFLOW,
        sha="d" * 40,
        run_id="777",
        run_attempt="3",
    )
    assert send(base_url, pr_run(9, merge_commit=None), token=fork).status_code == 201
    with Session(engine) as session:
        assert session.exec(select(Run.fork)).one() is True
    detail = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/100/detail").json()
    assert detail["provenance"]["fork"] is True
    # The fork workflow speaks for PR runs only, never for branch history.
    refused = send(base_url, envelope([record("p2p")], ci_run_id="101"), token=fork)
    assert refused.status_code == 403


def test_the_repository_id_is_bound_on_first_sight(
    base_url: str, keys: Keys, engine: Engine
) -> None:
    assert send(base_url, envelope([record("p2p")]), token=keys.token()).status_code == 201
    with Session(engine) as session:
        assert session.exec(select(Repository.github_id)).one() == int(REPO_ID)
    recreated = keys.token(repository_id="9999", run_id="101")
    response = send(base_url, envelope([record("p2p")], ci_run_id="101"), token=recreated)
    assert response.status_code == 403
    assert f"bound to GitHub repository id {REPO_ID}" in response.json()["detail"]
    assert "repository id 9999" in response.json()["detail"]
    assert runs(engine) == 1
    commits = httpx.post(
        f"{base_url}/api/v1/repos/{REPO}/commits",
        json={"parents": [{"commit": "c" * 40, "parent": BASE}]},
        headers={"Authorization": f"Bearer {recreated}"},
    )
    assert commits.status_code == 403


@pytest.fixture
def scoped(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        made = {
            s: create_token(session=session, repository=REPO, scope=s).token
            for s in ("pr", "branch")
        }
        session.commit()
    return made


def test_a_pr_scoped_token_uploads_pr_runs_only(
    base_url: str, scoped: dict[str, str], engine: Engine
) -> None:
    refused = send(base_url, envelope([record("p2p")]), token=scoped["pr"])
    assert refused.status_code == 403
    assert "has scope `pr`" in refused.json()["detail"]
    assert "--scope branch" in refused.json()["detail"]
    assert runs(engine) == 0
    assert send(base_url, pr_run(7), token=scoped["pr"]).status_code == 201
    assert (
        send(base_url, envelope([record("p2p")], ci_run_id="7"), token=scoped["branch"]).status_code
        == 201
    )
    detail = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/7/detail").json()
    assert detail["provenance"]["via"] == "token"
    assert detail["provenance"]["uploaded_by"].startswith("token:")


def test_commit_links_need_branch_rights_and_a_conflict_names_both_parents(
    base_url: str, scoped: dict[str, str]
) -> None:
    url = f"{base_url}/api/v1/repos/{REPO}/commits"

    def links(bearer: str, *pairs: tuple[str, str]) -> httpx.Response:
        body = {"parents": [{"commit": c, "parent": p} for c, p in pairs], "branch": "main"}
        return httpx.post(url, json=body, headers={"Authorization": f"Bearer {bearer}"})

    head, base, other = "c" * 40, BASE, "d" * 40
    refused = links(scoped["pr"], (head, base))
    assert (refused.status_code, "scope `branch`" in refused.json()["detail"]) == (403, True)
    assert links(scoped["branch"], (head, base)).json() == {"recorded": 1}
    assert links(scoped["branch"], (head, base)).status_code == 200  # the same link again
    clash = links(scoped["branch"], ("e" * 40, base), (head, other))
    assert clash.status_code == 409
    assert f"commit {head} already has first parent {base}, not {other}" in clash.json()["detail"]
    # Nothing of the refused request was stored: its other link can still be recorded anew.
    assert links(scoped["branch"], ("e" * 40, other)).status_code == 200


# --- the rules on their own ---------------------------------------------------------------


def oidc(**claims: str | None) -> Credential:
    base: dict[str, str | None] = {
        "repository": REPO,
        "repository_id": REPO_ID,
        "subject": "s",
        "event": "push",
        "ref": "refs/heads/main",
        "job_workflow_ref": None,
        "sha": BASE,
        "run_id": "100",
        "run_attempt": "1",
    }
    parsed = OidcClaims(**{**base, **claims})  # type: ignore[arg-type]
    return Credential(repository=REPO, via="oidc", subject="s", claims=parsed)


def claimed(**fields: Any) -> RunEnvelope:
    """What an upload claims: a run of main at BASE (run 100, attempt 1) unless told."""
    return RunEnvelope.model_validate(envelope([], **fields))


@pytest.mark.parametrize("event", ["push", "schedule", "workflow_dispatch"])
def test_branch_events_may_claim_their_branch(event: str) -> None:
    made = check_upload(oidc(event=event), claimed(), fork_workflows=())
    assert (made.event, made.ref, made.fork) == (event, "refs/heads/main", False)


def test_a_branch_claim_without_a_branch_is_refused() -> None:
    with pytest.raises(Forbidden, match="not branch None"):
        check_upload(oidc(), claimed(branch=None), fork_workflows=())


def test_a_fork_workflow_must_match_exactly() -> None:
    near = oidc(event="workflow_run", job_workflow_ref=FORK_WORKFLOW.replace("main", "evil"))
    with pytest.raises(Forbidden, match="CPCI_OIDC_FORK_WORKFLOWS"):
        check_upload(near, claimed(branch="f", pull_request=3), fork_workflows=(FORK_WORKFLOW,))
