"""A CI run id belongs to the scope that wrote it, end to end through a real uvicorn on SQLite
and PostgreSQL with scoped upload tokens and RSA-signed OIDC tokens: a pull request's credential
that takes a branch run's id first cannot keep the branch's own upload from landing (and the run
page then shows the branch's results and provenance), and it can never add an attempt or a shard
to a branch run (403 saying why, nothing written)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from cpci.schema import Outcome, RunEnvelope
from cpci.server.crud.tokens import create_token
from cpci.server.models import Result, Run, Shard
from tests.builders import BASE, HEAD, REPO, envelope, record, send
from tests.server.oidc_keys import MERGE, Keys, oidc_service, pull_request_claims


@pytest.fixture
def base_url(engine: Engine, db_url: str, keys: Keys) -> Iterator[str]:
    with oidc_service(db_url=db_url, keys=keys, engine=engine) as url:
        yield url


@pytest.fixture
def tokens(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        made = {
            scope: create_token(session=session, repository=REPO, scope=scope).token
            for scope in ("pr", "branch")
        }
        session.commit()
    return made


def pr_run(run: str, outcome: Outcome = "failed", **fields: Any) -> RunEnvelope:
    """A run of PR 7 (head HEAD, merge commit MERGE) whose config `p2p` ends `outcome`."""
    return envelope(
        [record("p2p", outcome, message="boom" if outcome == "failed" else None)],
        commit=HEAD,
        branch="feature",
        pull_request=7,
        base_commit=BASE,
        merge_commit=MERGE,
        ci_run_id=run,
        **fields,
    )


def main_run(run: str, **fields: Any) -> RunEnvelope:
    """A run of main at BASE whose config `p2p` passed."""
    return envelope([record("p2p")], ci_run_id=run, **fields)


def rows(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            model.__name__: session.exec(select(func.count()).select_from(model)).one()
            for model in (Run, Shard, Result)
        }


def test_a_pr_credential_that_takes_mains_run_id_first_cannot_keep_main_out(
    base_url: str, keys: Keys, tokens: dict[str, str]
) -> None:
    squat = send(base_url, pr_run("555", shard_total=2), token=tokens["pr"])
    assert squat.status_code == 201, squat.text
    main = send(base_url, main_run("555"), token=keys.token(run_id="555"))
    assert main.status_code == 201, main.text
    receipt = main.json()
    assert (receipt["status"], receipt["shards"]["text"]) == ("stored", "1/1 shards reported")
    summary = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/555").json()
    assert (summary["run"]["branch"], summary["run"]["commit"]) == ("main", BASE)
    assert summary["run"]["pull_request"] is None
    assert summary["outcomes"] == {"passed": 1}
    assert summary["failing"] == []
    detail = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/555/detail").json()
    assert (detail["provenance"]["via"], detail["provenance"]["event"]) == ("oidc", "push")
    assert [r["outcome"] for r in detail["results"]] == ["passed"]
    # The squatter's own results stay its PR's: its report still reads them.
    report = httpx.get(f"{base_url}/api/v1/repos/{REPO}/pulls/7/report").json()
    assert [r["ci_run_id"] for r in report["head_runs"]] == ["555"]
    # ... but the id is main's now: the PR may not add to it either.
    more = send(base_url, pr_run("555", shard_total=2, shard_index=1), token=tokens["pr"])
    assert more.status_code == 403, more.text
    assert "run 555 of acme/attn is a branch run" in more.json()["detail"]


@pytest.mark.parametrize(
    ("credential", "body"),
    [
        ("pr-token", pr_run("100", ci_attempt=2)),
        ("pr-token", pr_run("100", shard_index=1, shard_total=2)),
        ("branch-token-for-a-pr", pr_run("100", ci_attempt=2)),
        ("pr-oidc", pr_run("100", ci_attempt=1)),
    ],
    ids=["pr-token-attempt-2", "pr-token-another-shard", "any-pr-upload", "pr-oidc"],
)
def test_a_pr_upload_can_never_add_to_a_branch_run(
    base_url: str,
    keys: Keys,
    tokens: dict[str, str],
    engine: Engine,
    credential: str,
    body: RunEnvelope,
) -> None:
    assert send(base_url, main_run("100"), token=tokens["branch"]).status_code == 201
    before = rows(engine)
    bearer = {
        "pr-token": tokens["pr"],
        "branch-token-for-a-pr": tokens["branch"],
        "pr-oidc": keys.token(**pull_request_claims(7, run_id="100")),
    }[credential]
    refused = send(base_url, body, token=bearer)
    assert refused.status_code == 403, refused.text
    detail = refused.json()["detail"]
    assert "run 100 of acme/attn is a branch run (branch 'main' at aaaaaaaaaaaa" in detail
    assert "may not add attempts or shards to it" in detail
    assert "under its own CI run id (GITHUB_RUN_ID" in detail
    assert rows(engine) == before
    summary = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/100").json()
    assert (summary["attempts"], summary["outcomes"]) == ([1], {"passed": 1})


def test_branch_runs_add_attempts_to_their_own_run(base_url: str, tokens: dict[str, str]) -> None:
    """The rule is about scope, not order: the branch's own rerun still adds its attempt."""
    assert send(base_url, main_run("100"), token=tokens["branch"]).status_code == 201
    rerun = send(base_url, main_run("100", ci_attempt=2), token=tokens["branch"])
    assert rerun.status_code == 201, rerun.text
    summary = httpx.get(f"{base_url}/api/v1/repos/{REPO}/runs/100").json()
    assert summary["attempts"] == [1, 2]
