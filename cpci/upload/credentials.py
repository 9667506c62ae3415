"""How an upload proves who it is: a repository upload token, or a GitHub Actions OIDC token.

OIDC needs `permissions: id-token: write` in the workflow; GitHub then sets
`ACTIONS_ID_TOKEN_REQUEST_URL` and `ACTIONS_ID_TOKEN_REQUEST_TOKEN`, and a token minted for the
service's audience carries the `repository` claim the service checks against the upload.

Whoever holds those two variables can mint such a token, so the Action gets its token before the
tests start and hands the tests an environment without them (`cpci.action.suite_mode`); the token
is then held (`HeldToken`) and reused until shortly before it expires.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Literal
from urllib.parse import urlencode

import httpx

from cpci.upload.errors import CredentialsError

#: How an upload authenticates: a repository upload token, or a GitHub Actions OIDC token.
AuthMethod = Literal["token", "oidc"]


def bearer(
    auth: str,
    *,
    token: str | None,
    audience: str,
    environ: Mapping[str, str],
    transport: httpx.BaseTransport | None = None,
) -> str:
    """The bearer token for the upload request."""
    if auth == "token":
        if not token:
            raise CredentialsError("no upload token: pass --token or set CPCI_TOKEN")
        return token
    if auth != "oidc":
        raise CredentialsError(f"--auth must be token or oidc, got {auth!r}")
    url = environ.get("ACTIONS_ID_TOKEN_REQUEST_URL")
    request_token = environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    if not url or not request_token:
        raise CredentialsError(
            "OIDC needs ACTIONS_ID_TOKEN_REQUEST_URL/TOKEN: run in GitHub Actions with "
            "`permissions: id-token: write` (fork pull requests never get one)"
        )
    separator = "&" if "?" in url else "?"
    try:
        with httpx.Client(transport=transport, timeout=30) as http:
            response = http.get(
                f"{url}{separator}{urlencode({'audience': audience})}",
                headers={"Authorization": f"bearer {request_token}"},
            )
            response.raise_for_status()
            value = response.json()["value"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise CredentialsError(f"could not get a GitHub OIDC token: {exc}") from exc
    return str(value)


def expires_at(token: str) -> float | None:
    """The `exp` claim of a JWT, read without checking its signature (the service checks it;
    this only decides when to get a new one); None for a token that is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) else None


class HeldToken:
    """A bearer token got once and reused until `margin_s` before it expires, then got again.

    The Action calls it before the tests start, so the OIDC token is minted while only cpci runs;
    a suite that outlasts the token (GitHub's last minutes, not hours) gets a fresh one from
    cpci's own process at upload time. If that fails, the error says the first one expired."""

    def __init__(
        self,
        fresh: Callable[[], str],
        *,
        now: Callable[[], float] = time.time,
        margin_s: float = 60.0,
        announce: Callable[[str], None] = lambda line: None,
    ) -> None:
        self._fresh = fresh
        self._now = now
        self._margin_s = margin_s
        self._announce = announce
        self._value: str | None = None

    def __call__(self) -> str:
        if self._value is None:
            self._value = self._fresh()
            return self._value
        expiry = expires_at(self._value)
        if expiry is None or expiry - self._now() > self._margin_s:
            return self._value
        when = datetime.fromtimestamp(expiry, timezone.utc).strftime("%H:%M:%S UTC")
        self._announce(f"the token got before the tests expires at {when}: getting a new one")
        try:
            self._value = self._fresh()
        except CredentialsError as exc:
            raise CredentialsError(
                f"the OIDC token got before the tests expired at {when}, and a new one could "
                f"not be had: {exc}"
            ) from exc
        return self._value
