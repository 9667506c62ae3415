"""GitHub Actions OIDC: verify a workflow's ID token and say which repository it speaks for.

The signing keys come from a JWKS URL (GitHub's by default), cached for `cache_s` and refetched
when a token names a key id the cache does not know (GitHub rotates keys). Junk tokens must not
turn into fetches: fetches are at least `min_fetch_interval_s` apart, an unknown key id is
remembered as unknown for `cache_s`, and the fetch runs outside the lock (requests with known
keys never wait on it). When a refresh fails, the keys already cached keep being served. The
HTTP client and the clock are passed in, so tests point them at a loopback JWKS server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from cpci.server.core.errors import Unauthorized, Unavailable

ALGORITHMS = ["RS256"]
#: At most this many unknown key ids are remembered (each for `cache_s`).
UNKNOWN_KIDS_KEPT = 10_000
log = logging.getLogger(__name__)


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
        min_fetch_interval_s: float = 10.0,
        fetch_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jwks_url, self.issuer, self.audience = jwks_url, issuer, audience
        self._http, self._cache_s, self._clock = http, cache_s, clock
        self._min_interval_s, self._timeout_s = min_fetch_interval_s, fetch_timeout_s
        self._keys: dict[str, Any] = {}
        self._fetched_at: float | None = None  # the last successful fetch
        self._tried_at: float | None = None  # the last fetch started, successful or not
        self._failure: Unavailable | None = None  # why the last fetch failed
        self._unknown: dict[str, float] = {}  # key id -> until when it is known to be unknown
        self._inflight: threading.Event | None = None
        self._lock = threading.Lock()
        self.fetches = 0  # fetches started, for tests and metrics

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
                f"the OIDC token's audience is not {self.audience!r}: request it for that "
                "audience (`cpci upload --oidc-audience`, CPCI_OIDC_AUDIENCE or the Action's "
                "`oidc-audience`; by default they ask for the server URL they upload to)"
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthorized(f"the OIDC token was not issued by {self.issuer}") from exc
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"the OIDC token is invalid: {exc}") from exc
        return claims

    def _key(self, kid: str) -> Any:
        now = self._clock()
        with self._lock:
            fresh = self._fetched_at is not None and now - self._fetched_at <= self._cache_s
            if kid in self._keys and fresh:
                return self._keys[kid]
            if kid not in self._keys and self._unknown.get(kid, -1.0) > now:
                raise self._unknown_kid(kid)
            wait_for, fetch = self._inflight, self._may_fetch(now)
        if fetch is not None:
            self._fetch(fetch)
        elif wait_for is not None and kid not in self._keys:
            wait_for.wait(self._timeout_s + 1)  # a fetch in flight may bring this key id
        with self._lock:
            if kid in self._keys:
                return self._keys[kid]  # perhaps stale: better than refusing while GitHub is down
            if self._fetched_at is None and self._failure is not None:
                raise self._failure
            if self._fetched_at is not None and fetch is not None:
                self._remember_unknown(kid, now)
            raise self._unknown_kid(kid)

    def _may_fetch(self, now: float) -> threading.Event | None:
        """Claim the next fetch (under the lock), unless one is in flight or was made too
        recently; the caller then runs it with `_fetch`."""
        if self._inflight is not None:
            return None
        if self._tried_at is not None and now - self._tried_at < self._min_interval_s:
            return None
        self._tried_at, self._inflight = now, threading.Event()
        self.fetches += 1
        return self._inflight

    def _fetch(self, done: threading.Event) -> None:
        try:
            keys = self._download()
        except Unavailable as exc:
            with self._lock:
                self._failure = exc
                if self._keys:
                    log.warning("serving cached OIDC keys: %s", exc)
        else:
            with self._lock:
                self._keys, self._fetched_at, self._failure = keys, self._clock(), None
                self._unknown = {k: t for k, t in self._unknown.items() if k not in keys}
        finally:
            with self._lock:
                self._inflight = None
            done.set()

    def _download(self) -> dict[str, Any]:
        try:
            response = self._http.get(self.jwks_url, timeout=self._timeout_s)
            response.raise_for_status()
            jwks = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            raise Unavailable(
                f"cannot fetch the OIDC signing keys from {self.jwks_url}: {exc}; check "
                "CPCI_OIDC_JWKS_URL"
            ) from exc
        return {k.key_id: k.key for k in jwks.keys if k.key_id}

    def _remember_unknown(self, kid: str, now: float) -> None:
        if len(self._unknown) >= UNKNOWN_KIDS_KEPT:  # junk must not grow memory either
            self._unknown = {k: t for k, t in self._unknown.items() if t > now}
            if len(self._unknown) >= UNKNOWN_KIDS_KEPT:
                self._unknown.clear()
        self._unknown[kid] = now + self._cache_s

    @staticmethod
    def _unknown_kid(kid: str) -> Unauthorized:
        return Unauthorized(f"the OIDC token is signed by an unknown key id {kid[:100]!r}")
