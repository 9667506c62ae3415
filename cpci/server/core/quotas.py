"""Per-repository quotas on uploads, so one repository (or a stranger's) cannot fill the
database: results per upload (413) and stored shards per hour (429 with `Retry-After`).

The hourly count is read from the database at upload time, not kept in process memory, so
every replica behind a load balancer sees the same count. It is a sliding window: the upload is
refused while the `limit`-th most recent stored shard is less than an hour old, and
`Retry-After` says when that one leaves the window. The rules here are pure; the route passes
in what the database answered (`cpci.server.crud.quotas`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from cpci.server.core.errors import ApiError, PayloadTooLarge

#: The window the uploads-per-hour quota counts over.
WINDOW = timedelta(hours=1)


class QuotaExceeded(ApiError):
    """429: retry after the seconds in `Retry-After`."""

    status, code = 429, "quota_exceeded"


@dataclass(frozen=True)
class UploadRate:
    """The hourly quota an upload is checked against, at `now`."""

    per_hour: int
    now: datetime

    @property
    def since(self) -> datetime:
        return self.now - WINDOW


def check_results_per_upload(count: int, limit: int) -> None:
    """PayloadTooLarge when one upload holds more than `limit` results."""
    if count > limit:
        raise PayloadTooLarge(
            f"this upload holds {count} results, over the limit of {limit} per upload "
            "(CPCI_MAX_RESULTS_PER_UPLOAD): split the suite into more shards (the Action's "
            "shard-total, `cpci upload --shard I/N`) or ask the service's administrator to "
            "raise the limit"
        )


def check_upload_rate(*, repository: str, rate: UploadRate, oldest: datetime | None) -> None:
    """QuotaExceeded when the repository's quota for the hour is spent.

    `oldest` is the `rate.per_hour`-th most recent upload of the repository since `rate.since`
    (None when there were fewer): once it is an hour old, an upload is allowed again.
    """
    if oldest is None:
        return
    wait_s = max(1, math.ceil((oldest + WINDOW - rate.now).total_seconds()))
    raise QuotaExceeded(
        f"{repository} has stored {rate.per_hour} uploads in the last hour, the most "
        f"CPCI_MAX_UPLOADS_PER_HOUR allows: retry in {wait_s} s (Retry-After), or ask the "
        "service's administrator to raise the quota",
        headers={"Retry-After": str(wait_s)},
    )
