"""What the runner asks the service before a run: the durations shards are balanced by
(`--cpci-durations`) and each config's base-branch evidence reruns are decided by
(`--cpci-evidence`).

A URL (`http(s)://…/api/v1/repos/OWNER/NAME/durations`, `…/evidence?branch=B`) is fetched once,
in the parent, with the uploader's token variable (CPCI_TOKEN) when it is set, within a bounded
time. The token goes only
where it cannot be read on the way or by another host: over https, or plain http to loopback, and
only to the service `CPCI_SERVER` names when that is set; redirects are not followed (urllib would
carry the Authorization header to wherever a redirect points). The fetch is a few
lines of the standard library rather than the uploader's `ServiceClient`: the runner needs
neither httpx nor the uploader's credentials and OIDC machinery, and it must not depend on them.
A fetch that fails is never fatal (the shard still runs): the caller falls back and says so.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from cpci.runner.parent import sharding

#: The variable `cpci upload` reads its token from; the durations endpoint takes the same one.
TOKEN_ENV = "CPCI_TOKEN"
#: The uploader's service URL: when set, the token is only sent there.
SERVER_ENV = "CPCI_SERVER"
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
#: A slow service must not hold every shard of a CI run at collection for long.
FETCH_TIMEOUT_S = 20.0
#: Thousands of configs are well under a megabyte; anything past this is not an answer of ours.
MAX_BYTES = 32 * 1024 * 1024


class ServiceUnavailable(Exception):
    """The URL gave no answer the runner can use; the message says why (and names the URL)."""


#: Its name where the durations are fetched.
DurationsUnavailable = ServiceUnavailable


def fetch(
    url: str, environ: Mapping[str, str] | None = None, *, timeout_s: float = FETCH_TIMEOUT_S
) -> dict[str, float]:
    """The durations the service answers at `url` (a `cpci.durations/1` document)."""
    text = fetch_text(url, environ, timeout_s=timeout_s)
    try:
        return sharding.parse(text)
    except ValueError as exc:
        raise ServiceUnavailable(f"{url} did not answer a durations document: {exc}") from None


def fetch_text(
    url: str, environ: Mapping[str, str] | None = None, *, timeout_s: float = FETCH_TIMEOUT_S
) -> str:
    """The body the service answers at `url`, as text; `ServiceUnavailable` says why not."""
    env = os.environ if environ is None else environ
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    token = env.get(TOKEN_ENV, "")
    withheld = token_withheld(url, env.get(SERVER_ENV, "")) if token else None
    if token and withheld is None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _NO_REDIRECTS.open(request, timeout=timeout_s) as response:
            body = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            where = exc.headers.get("Location", "?")
            message = f"{url} redirected ({exc.code}) to {where}: give the final URL"
            raise ServiceUnavailable(message) from None
        hint = ""
        if exc.code in (401, 403):
            hint = f" ({TOKEN_ENV} not sent: {withheld})" if withheld else ""
            hint = hint or f" (set {TOKEN_ENV} to a token of the repository)"
        raise ServiceUnavailable(f"{url} answered {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        message = f"no answer from {url} within {timeout_s:g} s ({reason})"
        raise ServiceUnavailable(message) from None
    if len(body) > MAX_BYTES:
        raise ServiceUnavailable(f"{url} answered more than {MAX_BYTES} bytes")
    try:
        return str(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ServiceUnavailable(f"{url} did not answer text: {exc}") from None


def token_withheld(url: str, server: str) -> str | None:
    """Why the token must not go to `url` (None: it may): no plain http off this machine, and
    only to the service `server` names when it is set."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" and parts.hostname not in _LOOPBACK:
        return "plain http to another machine would show it to the network; use https"
    if server:
        wanted = urllib.parse.urlsplit(server)
        if (parts.scheme, parts.netloc) != (wanted.scheme, wanted.netloc):
            return f"the URL is not on {SERVER_ENV} ({server})"
    return None


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the error it is here, never followed with the token."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)
