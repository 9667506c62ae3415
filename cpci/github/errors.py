"""GitHub's errors, mapped once at the client's boundary to a small tree.

Callers catch `GitHubError` (or one branch of it) and show its message, which says what to fix:
GitHub's own messages ("Resource not accessible by integration") rarely do.
"""

from __future__ import annotations

import httpx


class GitHubError(Exception):
    """Any failed GitHub call. `status` is the HTTP status (0 when no answer came back)."""

    def __init__(self, message: str, *, status: int = 0, url: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.url = url


class Unreachable(GitHubError):
    """No answer: DNS, connection or timeout; the retries were spent."""


class AuthenticationFailed(GitHubError):
    """401: the token is missing, expired or revoked."""


class PermissionDenied(GitHubError):
    """403 that is not a rate limit: the token may not do this (e.g. a fork PR's token)."""


class NotFound(GitHubError):
    """404: wrong owner/repo/number, or a private repository the token cannot see."""


class ValidationFailed(GitHubError):
    """422: GitHub rejected the body (e.g. a comment over 65,536 characters)."""


class RateLimited(GitHubError):
    """Primary or secondary rate limit, still limited after waiting as long as allowed."""


class ServerError(GitHubError):
    """5xx after every retry: GitHub is having trouble; try again later."""


def _github_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return str(body.get("message", ""))[:500]
    return ""


def is_rate_limited(response: httpx.Response) -> bool:
    """A 403/429 that is GitHub's primary or secondary rate limit, not a permission problem."""
    if response.status_code not in (403, 429):
        return False
    if response.status_code == 429 or "retry-after" in response.headers:
        return True
    if response.headers.get("x-ratelimit-remaining") == "0":
        return True
    return "rate limit" in _github_message(response).lower()


def error_for(response: httpx.Response, *, action: str) -> GitHubError:
    """The exception for a failed response; `action` says what we were doing, for the message."""
    status = response.status_code
    said = _github_message(response)
    where = f"{action}: GitHub answered {status}" + (f" ({said})" if said else "")
    url = str(response.request.url) if response.request is not None else ""
    if status == 401:
        return AuthenticationFailed(
            f"{where}. The token is missing, expired or revoked: set a valid GITHUB_TOKEN, "
            "or check the GitHub App id, private key and installation id",
            status=status,
            url=url,
        )
    if is_rate_limited(response):
        return RateLimited(
            f"{where}. Still rate limited after waiting: space out the calls or use a GitHub "
            "App installation token (its limit is higher than GITHUB_TOKEN's)",
            status=status,
            url=url,
        )
    if status == 403:
        return PermissionDenied(
            f"{where}. The token may not do this. On a pull request from a fork, GITHUB_TOKEN is "
            "read-only: publish from a `workflow_run` workflow or the cpci service instead; "
            "otherwise grant `pull-requests: write` and `checks: write` in the workflow's "
            "`permissions:`",
            status=status,
            url=url,
        )
    if status == 404:
        return NotFound(
            f"{where}. Check the repository and number; for a private repository, the token "
            "must be able to see it",
            status=status,
            url=url,
        )
    if status == 422:
        return ValidationFailed(
            f"{where}. GitHub rejected the request body", status=status, url=url
        )
    if status >= 500:
        return ServerError(
            f"{where}. GitHub is having trouble: retry later", status=status, url=url
        )
    return GitHubError(where, status=status, url=url)
