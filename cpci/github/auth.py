"""Credentials for the GitHub client: a plain token, or a GitHub App installation.

A token is Actions' `GITHUB_TOKEN` or a personal access token. A GitHub App signs a short JWT
with its private key and trades it for an installation token (valid one hour), which is cached
and renewed five minutes before it expires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import httpx
import jwt

from cpci.github.errors import GitHubError, error_for
from cpci.github.retry import Clock

#: Renew an installation token this long before GitHub says it expires.
RENEW_BEFORE_S = 300.0


class Auth(Protocol):
    """Something that yields the bearer token for the next request."""

    def token(self, http: httpx.Client, clock: Clock) -> str: ...


@dataclass(frozen=True)
class TokenAuth:
    """A fixed token: `GITHUB_TOKEN` in Actions, or a personal access token."""

    value: str

    def __post_init__(self) -> None:
        if not self.value.strip():
            raise ValueError("the GitHub token is empty: set GITHUB_TOKEN (or pass --token)")

    def token(self, http: httpx.Client, clock: Clock) -> str:
        return self.value


@dataclass
class AppAuth:
    """A GitHub App installation: app id, its PEM private key and the installation id."""

    app_id: str
    private_key: str
    installation_id: int
    _cached: tuple[str, float] | None = field(default=None, init=False, repr=False)

    def app_jwt(self, now: float) -> str:
        """The app's own JWT (RS256, 9 minutes; issued a minute back against clock drift)."""
        claims = {"iat": int(now) - 60, "exp": int(now) + 9 * 60, "iss": str(self.app_id)}
        try:
            return jwt.encode(claims, self.private_key, algorithm="RS256")
        except (ValueError, TypeError, jwt.PyJWTError) as exc:
            raise GitHubError(
                f"cannot sign the GitHub App JWT with the configured private key ({exc}): "
                "pass the app's PEM private key as downloaded from the app's settings page"
            ) from exc

    def token(self, http: httpx.Client, clock: Clock) -> str:
        now = clock.now()
        if self._cached is not None and self._cached[1] - RENEW_BEFORE_S > now:
            return self._cached[0]
        response = http.post(
            f"/app/installations/{self.installation_id}/access_tokens",
            headers={"Authorization": f"Bearer {self.app_jwt(now)}"},
        )
        if response.status_code != 201:
            raise error_for(
                response,
                action=f"getting a token for GitHub App installation {self.installation_id}",
            )
        body = response.json()
        expires = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
        self._cached = (str(body["token"]), expires.timestamp())
        return self._cached[0]


def auth_from(
    *,
    token: str | None,
    app_id: str | None,
    private_key: str | None,
    installation_id: int | None,
) -> Auth:
    """The credentials a deployment configured: a GitHub App when it has an id, a key and the
    delivery named an installation; else the token. Raises naming what to set."""
    if app_id and private_key and installation_id:
        return AppAuth(app_id=app_id, private_key=private_key, installation_id=installation_id)
    if token:
        return TokenAuth(token)
    if app_id and private_key:
        raise GitHubError(
            "the webhook names no installation: install the GitHub App on the repository, or "
            "set CPCI_GITHUB_TOKEN"
        )
    raise GitHubError(
        "no GitHub credentials: set CPCI_GITHUB_TOKEN, or CPCI_GITHUB_APP_ID and "
        "CPCI_GITHUB_APP_PRIVATE_KEY"
    )
