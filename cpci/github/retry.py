"""When to try a GitHub call again, and how long to wait first.

GitHub asks clients to honour `Retry-After` on secondary rate limits, to wait until
`x-ratelimit-reset` once the primary limit is spent, and to back off on 5xx. Time is injected
(`Clock`), so tests check the waits without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from cpci.backoff import exponential
from cpci.github.errors import is_rate_limited

RETRIED_STATUSES = frozenset({500, 502, 503, 504})
#: GitHub's advice for a secondary limit without headers: wait at least a minute.
SECONDARY_DEFAULT_S = 60.0


@dataclass(frozen=True)
class Clock:
    """Wall time and sleeping, injectable so retry tests run instantly."""

    now: Callable[[], float] = field(default=time.time)
    sleep: Callable[[float], None] = field(default=time.sleep)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` calls at most; backoff doubles from `backoff_s` up to `max_backoff_s`; a rate
    limit that asks for more than `max_wait_s` is raised instead of waited out."""

    attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_wait_s: float = 15 * 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return exponential(attempt, base_s=self.backoff_s, max_s=self.max_backoff_s)

    def delay(self, response: httpx.Response, attempt: int, now: float) -> float | None:
        """Seconds to wait before retrying `response`, or None when it must not be retried."""
        if attempt >= self.attempts:
            return None
        if response.status_code in RETRIED_STATUSES:
            return self.backoff(attempt)
        if not is_rate_limited(response):
            return None
        wait = rate_limit_wait(response, now)
        if wait is None:
            wait = max(SECONDARY_DEFAULT_S, self.backoff(attempt))
        return wait if wait <= self.max_wait_s else None


def rate_limit_wait(response: httpx.Response, now: float) -> float | None:
    """What the headers ask for: `Retry-After` seconds, else until `x-ratelimit-reset` when the
    primary limit is spent; None when they say nothing."""
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            return None
    return primary_reset_wait(response.headers, now)


def primary_reset_wait(headers: httpx.Headers, now: float) -> float | None:
    """Seconds until the primary limit resets, when these headers say it is spent."""
    if headers.get("x-ratelimit-remaining") != "0":
        return None
    try:
        reset = float(headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None
    return max(0.0, reset - now) + 1.0  # the reset second itself may still be limited
