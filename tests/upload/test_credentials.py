"""Upload credentials: a token, or a GitHub Actions OIDC token asked for with the right audience."""

from __future__ import annotations

import httpx
import pytest

from cpci.upload.credentials import bearer
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
