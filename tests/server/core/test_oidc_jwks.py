"""The OIDC signing keys: junk key ids do not turn into JWKS fetches, and a JWKS endpoint that
goes down does not lock out tokens signed with keys already cached. A real JWKS server on
127.0.0.1 (counting its requests, switchable to 503) and a real uvicorn serving the app."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cpci.server.core.db import create_db_engine
from cpci.server.core.errors import Unauthorized, Unavailable
from cpci.server.core.migrate import upgrade
from cpci.server.core.oidc import OidcVerifier
from tests.builders import REPO, envelope, record, send
from tests.server.oidc_keys import AUDIENCE, ISSUER, Keys, jwks_server, oidc_service


@dataclass
class Jwks:
    """The JWKS server's URL and the keys it publishes (switchable to 503 by `keys.down`)."""

    url: str
    keys: Keys

    @property
    def requests(self) -> int:
        return self.keys.jwks_requests

    def token(self, kid: str = "k1") -> str:
        return self.keys.token(kid=kid)


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    keys = Keys()
    with jwks_server(keys) as url:
        yield Jwks(url, keys)


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
    with (
        oidc_service(db_url=db_url, keys=jwks.keys) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        body = envelope([record("p2p")])
        for i in range(25):
            junk = {"Authorization": f"Bearer {jwks.token(kid=f'junk-{i}')}"}
            response = send(client, body, headers=junk)
            assert response.status_code == 401, response.text
            assert "unknown key id" in response.json()["detail"]
        assert jwks.requests <= 1
        good = {"Authorization": f"Bearer {jwks.token()}"}
        assert send(client, body, headers=good).status_code == 201
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
        jwks.keys.down = True
        clock.t += 120  # the cache is stale: a refresh is tried, fails, the old key serves
        assert oidc.verify(jwks.token())["repository"] == REPO
        assert jwks.requests == 2
        assert oidc.verify(jwks.token())["repository"] == REPO  # within the interval: no fetch
        assert jwks.requests == 2
        with pytest.raises(Unauthorized, match="unknown key id"):  # not a 503
            oidc.verify(jwks.token(kid="rotated"))
        jwks.keys.down = False
        clock.t += 60
        assert oidc.verify(jwks.token())["repository"] == REPO
        assert jwks.requests == 3


def test_no_key_ever_fetched_is_a_503_naming_the_setting(jwks: Jwks) -> None:
    jwks.keys.down = True
    with httpx.Client() as http:
        oidc = verifier(jwks, http, Clock())
        for _ in range(5):
            with pytest.raises(Unavailable, match="CPCI_OIDC_JWKS_URL"):
                oidc.verify(jwks.token())
    assert jwks.requests == 1  # retried after the interval, not on every request
