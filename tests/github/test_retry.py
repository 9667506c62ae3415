"""`cpci.github.retry` on its own: which answers are tried again, and the wait before each, at
the edges of every rule (GitHub's documented advice, and the policy's own bounds)."""

from __future__ import annotations

import dataclasses
import time

import httpx
import pytest

from cpci.github.retry import (
    RETRIED_STATUSES,
    SECONDARY_DEFAULT_S,
    Clock,
    RetryPolicy,
    primary_reset_wait,
    rate_limit_wait,
)

NOW = 1_000_000.0


def answer(status: int, **headers: str) -> httpx.Response:
    body = b'{"message": "You have exceeded a secondary rate limit."}' if status == 403 else b"{}"
    return httpx.Response(status, headers=headers, content=body)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_githubs_server_errors_are_retried_with_backoff(status: int) -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=30.0)
    assert policy.delay(answer(status), attempt=1, now=NOW) == 1.0
    assert policy.delay(answer(status), attempt=3, now=NOW) == 4.0


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422, 501, 505])
def test_other_answers_are_not_retried(status: int) -> None:
    assert RetryPolicy().delay(answer(status), attempt=1, now=NOW) is None
    assert status not in RETRIED_STATUSES


def test_the_last_attempt_is_not_retried_and_attempts_are_at_least_one() -> None:
    policy = RetryPolicy(attempts=2)
    assert policy.delay(answer(503), attempt=1, now=NOW) is not None
    assert policy.delay(answer(503), attempt=2, now=NOW) is None
    assert RetryPolicy(attempts=1).delay(answer(503), attempt=1, now=NOW) is None
    with pytest.raises(ValueError, match="attempts must be >= 1, got 0"):
        RetryPolicy(attempts=0)


def test_the_backoff_is_capped() -> None:
    policy = RetryPolicy(backoff_s=2.0, max_backoff_s=5.0, attempts=10)
    assert [policy.backoff(n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 5.0, 5.0]


def test_retry_after_is_honoured_up_to_the_longest_wait() -> None:
    policy = RetryPolicy(max_wait_s=120.0)
    assert policy.delay(answer(429, **{"retry-after": "120"}), attempt=1, now=NOW) == 120.0
    assert policy.delay(answer(429, **{"retry-after": "121"}), attempt=1, now=NOW) is None
    assert rate_limit_wait(answer(429, **{"retry-after": "-5"}), NOW) == 0.0
    assert rate_limit_wait(answer(429, **{"retry-after": "soon"}), NOW) is None


def test_a_spent_primary_limit_waits_until_its_reset_and_one_second_more() -> None:
    spent = httpx.Headers({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(NOW + 30)})
    assert primary_reset_wait(spent, NOW) == 31.0
    past = httpx.Headers({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(NOW - 30)})
    assert primary_reset_wait(past, NOW) == 1.0
    left = httpx.Headers({"x-ratelimit-remaining": "1", "x-ratelimit-reset": str(NOW + 30)})
    assert primary_reset_wait(left, NOW) is None
    garbled = httpx.Headers({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "later"})
    assert primary_reset_wait(garbled, NOW) is None


def test_a_secondary_limit_without_headers_waits_githubs_minute() -> None:
    assert SECONDARY_DEFAULT_S == 60.0  # "wait at least one minute" (GitHub's REST docs)
    policy = RetryPolicy(backoff_s=1.0)
    assert policy.delay(answer(403), attempt=1, now=NOW) == 60.0
    long = RetryPolicy(backoff_s=100.0, max_backoff_s=1000.0)
    assert long.delay(answer(403), attempt=1, now=NOW) == 100.0


def test_the_defaults_and_that_a_policy_cannot_change_after_it_is_made() -> None:
    policy = RetryPolicy()
    assert (policy.attempts, policy.backoff_s, policy.max_backoff_s, policy.max_wait_s) == (
        5,
        1.0,
        30.0,
        900.0,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.attempts = 9  # type: ignore[misc]


def test_a_clock_is_real_time_by_default_and_cannot_change_after_it_is_made() -> None:
    clock = Clock()
    assert (clock.now, clock.sleep) == (time.time, time.sleep)
    with pytest.raises(dataclasses.FrozenInstanceError):
        clock.sleep = lambda _s: None  # type: ignore[misc]
