"""Upload credentials: a token, or a GitHub Actions OIDC token asked for with the right audience,
held from before the tests until shortly before it expires."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import jwt
import pytest

from cpci.upload.credentials import HeldToken, bearer, expires_at
from cpci.upload.errors import CredentialsError

ENV = {
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.example/idtoken?api-version=2.0",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-secret",
}


def test_oidc_token_is_requested_for_the_audience() -> None:
    asked: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200, json={"value": "header.claims.signature"})

    got = bearer(
        "oidc", token=None, audience="cpci-prod", environ=ENV, transport=httpx.MockTransport(handle)
    )
    assert got == "header.claims.signature"
    assert asked[0].url.params["audience"] == "cpci-prod"
    assert asked[0].url.params["api-version"] == "2.0"
    assert asked[0].headers["authorization"] == "bearer request-secret"


def test_missing_credentials_say_what_to_configure() -> None:
    with pytest.raises(CredentialsError, match="id-token: write"):
        bearer("oidc", token=None, audience="cpci", environ={})
    with pytest.raises(CredentialsError, match="--token or set CPCI_TOKEN"):
        bearer("token", token=None, audience="cpci", environ={})
    refused = httpx.MockTransport(lambda request: httpx.Response(403, json={"message": "no"}))
    with pytest.raises(CredentialsError, match="could not get a GitHub OIDC token"):
        bearer("oidc", token=None, audience="cpci", environ=ENV, transport=refused)


@dataclass
class Minter:
    """GitHub's token endpoint as cpci sees it: each call mints a JWT valid for `valid_s` from
    the clock's now, or fails once `broken`."""

    clock: list[float]
    valid_s: float = 300.0
    broken: bool = False
    minted: int = 0

    def __call__(self) -> str:
        if self.broken:
            raise CredentialsError("could not get a GitHub OIDC token: 503")
        self.minted += 1
        claims = {"exp": int(self.clock[0] + self.valid_s), "n": self.minted}
        return jwt.encode(claims, "k" * 32, algorithm="HS256")


def test_a_held_token_is_reused_until_shortly_before_it_expires() -> None:
    clock = [1_800_000_000.0]
    minter = Minter(clock)
    said: list[str] = []
    held = HeldToken(minter, now=lambda: clock[0], margin_s=60, announce=said.append)
    first = held()
    clock[0] += 200  # a suite of 200 s: still valid for 100 s
    assert held() == first
    assert minter.minted == 1
    clock[0] += 50  # 50 s left: inside the margin, a new one for the upload
    assert held() != first
    assert minter.minted == 2
    assert said == ["the token got before the tests expires at 08:05:00 UTC: getting a new one"]
    assert expires_at(held()) == clock[0] + 300


def test_a_token_that_expired_and_cannot_be_renewed_says_so() -> None:
    clock = [1_800_000_000.0]
    minter = Minter(clock)
    held = HeldToken(minter, now=lambda: clock[0])
    held()
    clock[0] += 3600  # an hour-long suite
    minter.broken = True
    with pytest.raises(CredentialsError, match="got before the tests expired at 08:05:00 UTC"):
        held()


def test_an_upload_token_is_never_got_again() -> None:
    asked: list[int] = []

    def fresh() -> str:
        asked.append(1)
        return "cpci_0123456789"

    held = HeldToken(fresh, now=lambda: 4e9)
    assert [held(), held()] == ["cpci_0123456789"] * 2
    assert asked == [1]
    assert expires_at("cpci_0123456789") is None
    assert expires_at("a.b.c") is None  # not base64 JSON: not a JWT cpci can read
