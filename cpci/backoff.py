"""Capped exponential backoff: the one formula behind every retry cpci makes.

Both HTTP clients retry (the GitHub client in `cpci.github.retry`, the uploader's client of the
cpci service in `cpci.upload.retry`); their reasons to retry differ (GitHub's rate-limit headers,
the service's 5xx and 429), the waits between tries do not. This module depends on nothing so
either side imports it without importing the other.
"""

from __future__ import annotations


def exponential(attempt: int, *, base_s: float, max_s: float) -> float:
    """The wait after failed attempt `attempt` (1-based): `base_s` doubling, at most `max_s`."""
    return float(min(max_s, base_s * 2 ** (attempt - 1)))
