"""GitHub Actions OIDC: verify a workflow's ID token and say which repository it speaks for.

The signing keys come from a JWKS URL (GitHub's by default), cached for a while and refetched
when a token names a key id the cache does not know (GitHub rotates keys). The HTTP client is
passed in, so tests can point it at a loopback JWKS server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from cpci.server.core.errors import Unauthorized, Unavailable

ALGORITHMS = ["RS256"]


class OidcVerifier:
    """Checks signature, issuer, audience and expiry; returns the verified claims."""

    def __init__(
        self,
        *,
        jwks_url: str,
        issuer: str,
        audience: str,
        http: httpx.Client,
        cache_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jwks_url, self.issuer, self.audience = jwks_url, issuer, audience
        self._http, self._cache_s, self._clock = http, cache_s, clock
        self._keys: dict[str, Any] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()

    def verify(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"the bearer token is not a JWT: {exc}") from exc
        kid = header.get("kid")
        key = self._key(str(kid))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "iss", "aud", "repository"]},
                leeway=30,
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthorized("the OIDC token has expired: request a fresh one") from exc
        except jwt.InvalidAudienceError as exc:
            raise Unauthorized(
                f"the OIDC token's audience is not {self.audience!r}: request it with "
                f"`core.getIDToken('{self.audience}')`"
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthorized(f"the OIDC token was not issued by {self.issuer}") from exc
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"the OIDC token is invalid: {exc}") from exc
        return claims

    def _key(self, kid: str) -> Any:
        with self._lock:
            stale = self._fetched_at is None or self._clock() - self._fetched_at > self._cache_s
            if stale or kid not in self._keys:
                self._refresh()
            if kid not in self._keys:
                raise Unauthorized(f"the OIDC token is signed by an unknown key id {kid!r}")
            return self._keys[kid]

    def _refresh(self) -> None:
        try:
            response = self._http.get(self.jwks_url, timeout=10)
            response.raise_for_status()
            jwks = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            raise Unavailable(
                f"cannot fetch the OIDC signing keys from {self.jwks_url}: {exc}; check "
                "CPCI_OIDC_JWKS_URL"
            ) from exc
        self._keys = {k.key_id: k.key for k in jwks.keys if k.key_id}
        self._fetched_at = self._clock()
