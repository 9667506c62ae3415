"""The live result service for the Action's tests (the one the upload tests use), and a GitHub
Actions job with `id-token: write`: GitHub's token endpoint on loopback, minting RSA-signed
tokens that a live service checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.builders import REPO
from tests.live_server import Request, serve_answers
from tests.server.oidc_keys import PUSH_TO_MAIN, Keys, oidc_service
from tests.upload.support import migrated_database, service

__all__ = ["OidcJob", "oidc_job", "service"]


@dataclass
class OidcJob:
    """The job's variables (a push to main of run `act-oidc` unless a test changes them and
    `claims`), the service's URL, and the token requests the endpoint answered."""

    service: str
    env: dict[str, str]
    claims: dict[str, Any] = field(default_factory=dict)
    minted: list[str] = field(default_factory=list)


@pytest.fixture
def oidc_job(tmp_path: Path) -> Iterator[OidcJob]:
    keys = Keys()
    holder: list[OidcJob] = []

    def answer(request: Request) -> tuple[int, bytes]:
        job = holder[0]
        if request.path == "/count":
            return 200, json.dumps({"minted": len(job.minted)}).encode()
        job.minted.append(request.headers["authorization"])
        return 200, json.dumps({"value": keys.token(**job.claims)}).encode()

    database = migrated_database(tmp_path)
    with (
        serve_answers(answer) as endpoint,
        oidc_service(db_url=database.url, keys=keys, engine=database.engine) as url,
    ):
        env = {
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_SHA": "d" * 40,
            "GITHUB_RUN_ID": "act-oidc",
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_REF_NAME": "main",
            "RUNNER_TEMP": str(tmp_path / "temp"),
            "ACTIONS_ID_TOKEN_REQUEST_URL": f"{endpoint}/idtoken?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-secret",
            "PROBE_URL": f"{endpoint}/count",
        }
        claims = {**PUSH_TO_MAIN, "sha": env["GITHUB_SHA"], "run_id": env["GITHUB_RUN_ID"]}
        holder.append(OidcJob(url, env, claims))
        yield holder[0]
    database.engine.dispose()
