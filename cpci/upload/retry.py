"""The one retry policy for talking to the cpci service: exponential backoff with full jitter.

A request is tried again only when a retry may get through (no answer, 408, 429, 5xx; see
`UploadFailed.retryable`); a refusal a retry cannot fix (401, 403, 409, 413, 422) is raised at
once. Jitter spreads the retries of many shards that lost the service at the same moment.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from cpci.backoff import exponential
from cpci.upload.errors import UploadFailed

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """`attempts` tries at most; `sleep` and `jitter` are injectable so tests never sleep."""

    attempts: int = 5
    base_s: float = 1.0
    max_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    jitter: Callable[[float, float], float] = field(default=random.uniform, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"Backoff.attempts must be >= 1, got {self.attempts}")

    def wait(self, attempt: int) -> None:
        """Sleep after failed attempt `attempt` (1-based)."""
        self.sleep(self.jitter(0.0, exponential(attempt, base_s=self.base_s, max_s=self.max_s)))

    def call(self, request: Callable[[], T]) -> T:
        """`request()`, tried again after a retryable `UploadFailed` until attempts run out."""
        for attempt in range(1, self.attempts + 1):
            try:
                return request()
            except UploadFailed as exc:
                if not exc.retryable or attempt == self.attempts:
                    raise
            self.wait(attempt)
        raise AssertionError("unreachable")  # the last attempt returns or raises


#: A single try: for calls that are a help, never a condition (ancestry, the report's read).
ONCE = Backoff(attempts=1)
