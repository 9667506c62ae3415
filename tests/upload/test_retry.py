"""The one retry policy for the cpci service: capped exponential backoff with full jitter, the
same formula the GitHub client waits by, and a retry only where one may get through."""

from __future__ import annotations

import pytest

from cpci.backoff import exponential
from cpci.github.retry import RetryPolicy
from cpci.upload.errors import UploadFailed
from cpci.upload.retry import ONCE, Backoff


def test_waits_double_up_to_the_cap_within_full_jitter() -> None:
    bounds: list[tuple[float, float]] = []

    def jitter(low: float, high: float) -> float:
        bounds.append((low, high))
        return high / 2

    waits: list[float] = []
    backoff = Backoff(attempts=6, base_s=1.0, max_s=5.0, sleep=waits.append, jitter=jitter)
    for attempt in range(1, 6):
        backoff.wait(attempt)
    assert bounds == [(0.0, 1.0), (0.0, 2.0), (0.0, 4.0), (0.0, 5.0), (0.0, 5.0)]
    assert waits == [0.5, 1.0, 2.0, 2.5, 2.5]


def test_the_github_client_waits_by_the_same_formula() -> None:
    github = RetryPolicy(backoff_s=1.5, max_backoff_s=20.0)
    assert [github.backoff(n) for n in range(1, 7)] == [
        exponential(n, base_s=1.5, max_s=20.0) for n in range(1, 7)
    ]
    assert [exponential(n, base_s=1.5, max_s=20.0) for n in (1, 4, 5)] == [1.5, 12.0, 20.0]


def test_call_stops_at_the_first_failure_a_retry_cannot_fix() -> None:
    tried: list[int] = []
    waits: list[float] = []

    def refused() -> str:
        tried.append(1)
        raise UploadFailed("refused", 403)

    with pytest.raises(UploadFailed, match="refused"):
        Backoff(attempts=5, sleep=waits.append).call(refused)
    assert (len(tried), waits) == (1, [])


def test_call_gives_up_after_its_attempts_with_the_last_error() -> None:
    statuses = iter([503, 502, 500, 200])
    waits: list[float] = []

    def busy() -> int:
        status = next(statuses)
        raise UploadFailed(f"answered {status}", status)

    backoff = Backoff(attempts=3, sleep=waits.append, jitter=lambda low, high: high)
    with pytest.raises(UploadFailed, match="answered 500"):
        backoff.call(busy)
    assert waits == [1.0, 2.0]  # no wait after the last try
    assert ONCE.call(lambda: "sent") == "sent"


def test_attempts_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match=r"Backoff\.attempts must be >= 1, got 0"):
        Backoff(attempts=0)
