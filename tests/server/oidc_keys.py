"""GitHub Actions OIDC on loopback: an RSA key pair, tokens signed with it, a JWKS server
publishing its public half (like GitHub's /.well-known/jwks), and a live service trusting it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from tests.builders import BASE, REPO
from tests.live_server import Request, serve, serve_answers

ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "cpci-test"
REPO_ID = "4242"
#: The merge commit GitHub makes of a PR's head into its base: a PR token's `sha`.
MERGE = "e" * 40
#: The claims of a push to main, as GitHub mints them (the ones cpci looks at): run 100,
#: attempt 1, at `builders.BASE`, as `builders.envelope` uploads by default.
PUSH_TO_MAIN = {
    "sub": f"repo:{REPO}:ref:refs/heads/main",
    "repository": REPO,
    "repository_id": REPO_ID,
    "event_name": "push",
    "ref": "refs/heads/main",
    "job_workflow_ref": f"{REPO}/.github/workflows/ci.yml@refs/heads/main",
    "sha": BASE,
    "run_id": "100",
    "run_attempt": "1",
}


def pull_request_claims(number: int, repo: str = REPO, run_id: str = "100") -> dict[str, Any]:
    """The claims of a `pull_request` workflow of PR `number` (its merge ref, whose merge
    commit is MERGE), CI run `run_id`, attempt 1."""
    return {
        "sub": f"repo:{repo}:pull_request",
        "event_name": "pull_request",
        "ref": f"refs/pull/{number}/merge",
        "job_workflow_ref": f"{repo}/.github/workflows/ci.yml@refs/pull/{number}/merge",
        "sha": MERGE,
        "run_id": run_id,
        "run_attempt": "1",
    }


class Keys:
    """`good` signs tokens the JWKS publishes (as `k1`), `evil` ones it does not; the JWKS
    server counts its requests in `jwks_requests` and answers 503 while `down`."""

    def __init__(self) -> None:
        self.good = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.evil = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks_requests = 0
        self.down = False

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.good.public_key()))
        return {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}

    def claims(self, **override: Any) -> dict[str, Any]:
        """A token's claims, valid for five minutes: a push to main unless `override` says
        otherwise (None drops a claim)."""
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            **PUSH_TO_MAIN,
        }
        body.update(override)
        return {k: v for k, v in body.items() if v is not None}

    def token(self, key: Any = None, kid: str = "k1", **claims: Any) -> str:
        """A signed token of `claims(**claims)`; `key` (default `good`) signs it."""
        body = self.claims(**claims)
        return jwt.encode(body, key or self.good, algorithm="RS256", headers={"kid": kid})

    def public_pem(self) -> bytes:
        """The published key as PEM: what an algorithm-confusion attacker would HMAC with."""
        return self.good.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@contextmanager
def jwks_server(keys: Keys) -> Iterator[str]:
    """Serve `keys`' JWKS on a loopback port; yields its URL."""

    def answer(request: Request) -> tuple[int, bytes]:
        keys.jwks_requests += 1
        return (503, b"{}") if keys.down else (200, json.dumps(keys.jwks()).encode())

    with serve_answers(answer) as url:
        yield f"{url}/.well-known/jwks"


@contextmanager
def oidc_service(
    *, db_url: str, keys: Keys, engine: Engine | None = None, **settings: Any
) -> Iterator[str]:
    """A live service over `db_url` that trusts `keys`' tokens (issuer ISSUER; audience
    AUDIENCE and repository REPO unless `settings` say otherwise) with these extra settings;
    yields its base URL."""
    with jwks_server(keys) as jwks, httpx.Client() as oidc_http:
        configured = Settings(
            database_url=db_url,
            oidc_issuer=ISSUER,
            oidc_jwks_url=jwks,
            **{"oidc_audience": AUDIENCE, "oidc_allowed_repositories": (REPO,), **settings},
        )
        with serve(create_app(configured, engine=engine, oidc_http=oidc_http)) as url:
            yield url
