"""Priming at start-up: the report read models of the most recently active pull requests, read
into the app's `ShardCache` before the service serves, so the first report read after a restart
(the Action's report job, the bot, a reviewer re-opening the page) is as fast as the ones after.

A restart empties the cache, and reading an 80,000-config storm head again takes seconds. Priming
spends start-up time on it instead, bounded: no new PR is started once CPCI_WARM_ON_START_S is
spent; only PRs whose newest run is recent (CPCI_WARM_ON_START_DAYS) are read, newest first, at
most CPCI_WARM_ON_START_PULLS of them and no more than the cache keeps (more would push the
newest out again). What is read is exactly what an upload's warm step reads
(`warm_pull_report`). It is an optimisation: a PR that fails to prime is logged and left to its
first read, and nothing here stops the service from starting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlmodel import Session, col

from cpci.server.core.policies import PrimingPolicy, PullReportPolicy
from cpci.server.crud.pull_report import READ_MODELS_PER_PULL, warm_pull_report
from cpci.server.crud.shard_cache import ShardCache
from cpci.server.models import Repository, Run, utcnow
from cpci.urls import Links

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecentPull:
    """A pull request whose newest run is recent, and that run's head commit."""

    repository: str
    number: int
    commit: str

    def __str__(self) -> str:
        return f"{self.repository}#{self.number}"


@dataclass(frozen=True)
class Priming:
    """What priming did: the PRs read, those whose read failed, those skipped (budget spent)."""

    primed: list[RecentPull] = field(default_factory=list)
    failed: list[RecentPull] = field(default_factory=list)
    skipped: list[RecentPull] = field(default_factory=list)


def recent_pulls(*, session: Session, since: datetime, limit: int) -> list[RecentPull]:
    """Up to `limit` pull requests with a run uploaded since `since`, the one with the newest
    run first (run ids grow with upload time, so the newest recent run is the PR's newest)."""
    newest = (
        sa.select(sa.func.max(col(Run.id)).label("id"))
        .where(col(Run.pull_request).is_not(None), col(Run.created_at) >= since)
        .group_by(col(Run.repository_id), col(Run.pull_request))
        .order_by(sa.func.max(col(Run.id)).desc())
        .limit(limit)
        .subquery()
    )
    rows = session.connection().execute(
        sa.select(col(Repository.name), col(Run.pull_request), col(Run.commit))
        .join(newest, col(Run.id) == newest.c.id)
        .join(Repository, col(Repository.id) == col(Run.repository_id))
        .order_by(col(Run.id).desc())
    )
    pulls = []
    for name, number, commit in rows:
        assert number is not None  # runs of pull requests only
        pulls.append(RecentPull(name, number, commit))
    return pulls


def prime_pull_reports(
    *,
    engine: Engine,
    priming: PrimingPolicy,
    policy: PullReportPolicy,
    links: Links,
    cache: ShardCache,
    clock: Callable[[], float] = time.monotonic,
) -> Priming:
    """Read the report read models (by `policy`) of the recently active PRs into `cache`,
    within `priming`'s limits (CPCI_WARM_ON_START_*); one log line per PR. Never raises: a
    failure is logged."""
    if not priming.enabled:
        return Priming()
    budget = priming.seconds
    start = clock()
    limit = min(priming.pulls, cache.shard_set_capacity // READ_MODELS_PER_PULL)
    if limit < priming.pulls:
        log.info(
            "priming at most %d PR(s), not CPCI_WARM_ON_START_PULLS=%d: the cache keeps %d "
            "values by shard set, %d per PR",
            limit,
            priming.pulls,
            cache.shard_set_capacity,
            READ_MODELS_PER_PULL,
        )
    since = utcnow() - timedelta(days=priming.days)
    try:
        with Session(engine) as session:
            pulls = recent_pulls(session=session, since=since, limit=limit)
    except Exception:  # the service starts whatever the database said; its reads will tell
        log.exception("could not list the recently active PRs to prime; priming none")
        return Priming()
    done = Priming()
    for i, pull in enumerate(pulls):
        if clock() - start >= budget:
            done.skipped.extend(pulls[i:])
            log.warning(
                "CPCI_WARM_ON_START_S=%g spent: not priming %s (their first reads load them)",
                budget,
                ", ".join(map(str, done.skipped)),
            )
            break
        began = clock()
        try:
            with Session(engine) as session:
                warm_pull_report(
                    session=session,
                    repository=pull.repository,
                    number=pull.number,
                    commit=pull.commit,
                    policy=policy,
                    links=links,
                    cache=cache,
                )
        except Exception:  # bad data or a database error: this PR's first read loads it
            log.exception("could not prime the report of %s; its first read loads it", pull)
            done.failed.append(pull)
            continue
        done.primed.append(pull)
        log.info("primed the report of %s in %.2f s", pull, clock() - began)
    return done
