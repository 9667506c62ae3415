"""The OIDC signing keys: junk key ids do not turn into JWKS fetches, and a JWKS endpoint that
goes down does not lock out tokens signed with keys already cached. A real JWKS server on
127.0.0.1 (counting its requests, switchable to 503) and a real uvicorn serving the app."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from cpci.server import Settings, create_app
from cpci.server.core.db import create_db_engine
from cpci.server.core.errors import Unauthorized, Unavailable
from cpci.server.core.migrate import upgrade
from cpci.server.core.oidc import OidcVerifier
from tests.live_server import serve
from tests.server.service_builders import REPO, envelope, record

ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "cpci-jwks-test"


@dataclass
class Jwks:
    """GitHub's /.well-known/jwks on loopback: one RSA key, `k1`; `down` answers 503."""

    url: str = ""
    key: Any = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    requests: int = 0
    down: bool = False

    def document(self) -> bytes:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    def token(self, kid: str = "k1") -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "repository": REPO,
            "sub": f"repo:{REPO}:ref:refs/heads/main",
            "event_name": "push",
            "ref": "refs/heads/main",
            "repository_id": "4242",
            "job_workflow_ref": f"{REPO}/.github/workflows/ci.yml@refs/heads/main",
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": kid})


@contextmanager
def jwks_server() -> Iterator[Jwks]:
    jwks = Jwks()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            jwks.requests += 1
            status, body = (503, b"{}") if jwks.down else (200, jwks.document())
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    jwks.url = f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks"
    try:
        yield jwks
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    with jwks_server() as served:
        yield served


@dataclass
class Clock:
    t: float = 1000.0

    def __call__(self) -> float:
        return self.t


def verifier(jwks: Jwks, http: httpx.Client, clock: Clock, cache_s: float = 300) -> OidcVerifier:
    return OidcVerifier(
        jwks_url=jwks.url,
        issuer=ISSUER,
        audience=AUDIENCE,
        http=http,
        cache_s=cache_s,
        min_fetch_interval_s=10,
        clock=clock,
    )


def test_25_junk_key_ids_through_the_service_cost_at_most_one_fetch(
    jwks: Jwks, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'cpci.db'}"
    engine = create_db_engine(db_url)
    upgrade(engine)
    engine.dispose()
    settings = Settings(
        database_url=db_url, oidc_audience=AUDIENCE, oidc_issuer=ISSUER, oidc_jwks_url=jwks.url
    )
    with httpx.Client() as oidc_http:
        app = create_app(settings, oidc_http=oidc_http)
        with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            body = envelope([record("p2p")])
            for i in range(25):
                junk = {"Authorization": f"Bearer {jwks.token(kid=f'junk-{i}')}"}
                response = client.post("/api/v1/uploads", json=body, headers=junk)
                assert response.status_code == 401, response.text
                assert "unknown key id" in response.json()["detail"]
            assert jwks.requests <= 1
            good = {"Authorization": f"Bearer {jwks.token()}"}
            assert client.post("/api/v1/uploads", json=body, headers=good).status_code == 201
            assert jwks.requests <= 1


def test_the_same_junk_key_id_is_remembered_past_the_fetch_interval(jwks: Jwks) -> None:
    clock = Clock()
    with httpx.Client() as http:
        oidc = verifier(jwks, http, clock)
        for _ in range(3):
            with pytest.raises(Unauthorized, match="unknown key id 'junk'"):
                oidc.verify(jwks.token(kid="junk"))
            clock.t += 60  # past the minimum interval, within the negative cache
        assert jwks.requests == 1
        clock.t += 300  # the negative entry lapsed: one more look, then remembered again
        with pytest.raises(Unauthorized):
            oidc.verify(jwks.token(kid="junk"))
        assert jwks.requests == 2


def test_a_jwks_that_goes_down_still_lets_cached_key_tokens_through(jwks: Jwks) -> None:
    clock = Clock()
    with httpx.Client() as http:
        oidc = verifier(jwks, http, clock, cache_s=60)
        assert oidc.verify(jwks.token())["repository"] == REPO
        jwks.down = True
        clock.t += 120  # the cache is stale: a refresh is tried, fails, the old key serves
        assert oidc.verify(jwks.token())["repository"] == REPO
        assert jwks.requests == 2
        assert oidc.verify(jwks.token())["repository"] == REPO  # within the interval: no fetch
        assert jwks.requests == 2
        with pytest.raises(Unauthorized, match="unknown key id"):  # not a 503
            oidc.verify(jwks.token(kid="rotated"))
        jwks.down = False
        clock.t += 60
        assert oidc.verify(jwks.token())["repository"] == REPO
        assert jwks.requests == 3


def test_no_key_ever_fetched_is_a_503_naming_the_setting(jwks: Jwks) -> None:
    jwks.down = True
    with httpx.Client() as http:
        oidc = verifier(jwks, http, Clock())
        for _ in range(5):
            with pytest.raises(Unavailable, match="CPCI_OIDC_JWKS_URL"):
                oidc.verify(jwks.token())
    assert jwks.requests == 1  # retried after the interval, not on every request
