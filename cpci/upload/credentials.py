"""How an upload proves who it is: a repository upload token, or a GitHub Actions OIDC token.

OIDC needs `permissions: id-token: write` in the workflow; GitHub then sets
`ACTIONS_ID_TOKEN_REQUEST_URL` and `ACTIONS_ID_TOKEN_REQUEST_TOKEN`, and a token minted for the
service's audience carries the `repository` claim the service checks against the upload.
"""

from __future__ import annotations

from collections.abc import Mapping
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
