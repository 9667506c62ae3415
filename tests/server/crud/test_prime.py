"""Priming at start-up: after a restart, the service reads the report read models of its most
recently active PRs before it serves, so their first report read loads nothing (the cache's
counts say so, on a real uvicorn over each engine); off with CPCI_WARM_ON_START_S=0; at most
CPCI_WARM_ON_START_PULLS PRs, only recent ones, no new PR past the time budget (a clock moved
by the cache's listener, no sleeps); a PR whose priming fails is logged and read normally later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from cpci import urls
from cpci.schema import PullRequestReport
from cpci.server import Settings, create_app
from cpci.server.core.policies import ServicePolicies
from cpci.server.crud.prime import Priming, prime_pull_reports
from cpci.server.crud.shard_cache import CacheEvent, KindCounts, ShardCache
from cpci.server.models import utcnow
from cpci.urls import Links
from tests.builders import BASE, REPO, config, envelope, record, sha, upload
from tests.live_server import serve
from tests.server.databases import ClientFactory

CONFIGS = 30
#: Start-up priming and the upload's warm step off: what the seeding service does.
QUIET: dict[str, Any] = {"warm_on_start_s": 0, "warm_pull_reports": False}


def seed(make_client: ClientFactory, token: str, pulls: list[int]) -> None:
    """A base where every config passes, then one PR run per number in `pulls`, in that order
    (the last is the most recently active), each failing a config of its own."""
    client = make_client(**QUIET)
    client.headers["Authorization"] = f"Bearer {token}"
    upload(client, envelope([record(f"c{i:02d}") for i in range(CONFIGS)]))
    for n in pulls:
        head = [record(f"c{i:02d}") for i in range(CONFIGS) if i != n]
        head.append(record(f"c{n:02d}", "failed", message=f"AssertionError: pr {n}"))
        upload(
            client,
            envelope(
                head,
                commit=sha(100 + n),
                branch=f"feature-{n}",
                pull_request=n,
                base_commit=BASE,
                ci_run_id=str(100 + n),
            ),
        )


def restarted(engine: Engine, db_url: str, cache: ShardCache | None = None, **settings: Any) -> Any:
    """A new app over the same database: a restarted service, its cache empty."""
    app = create_app(Settings(database_url=db_url, **settings), engine=engine)
    if cache is not None:
        app.state.shard_cache = cache
    return app


def prime(
    engine: Engine,
    settings: Settings,
    cache: ShardCache,
    clock: Callable[[], float] = time.monotonic,
) -> Priming:
    """Priming as the app's start-up does it, with `settings`' policies."""
    policies = ServicePolicies.from_settings(settings)
    return prime_pull_reports(
        engine=engine,
        priming=policies.priming,
        policy=policies.pull_report,
        links=Links(),
        cache=cache,
        clock=clock,
    )


def report_of(client: httpx.Client, number: int) -> PullRequestReport:
    response = client.get(urls.api_pull_report(REPO, number))
    assert response.status_code == 200, response.text
    return PullRequestReport.model_validate_json(response.content)


def failing(report: PullRequestReport) -> list[str]:
    return [v.config for v in report.new_failures]


@pytest.mark.parametrize("prime", [True, False])
def test_after_a_restart_the_first_report_read_finds_its_head_primed(
    engine: Engine, db_url: str, token: str, make_client: ClientFactory, prime: bool
) -> None:
    seed(make_client, token, [7])
    app = restarted(engine, db_url, warm_on_start_s=20 if prime else 0)
    cache: ShardCache = app.state.shard_cache
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/healthz").status_code == 200  # answered once start-up is over
        started = KindCounts(loads=1) if prime else KindCounts()
        assert cache.counts("pull_head") == started
        assert cache.counts("results_by_leg") == started  # the base's
        assert cache.counts("passed_durations_by_leg") == started  # its timings: 29 passed
        report = report_of(client, 7)
    assert failing(report) == [config("c07")]
    if prime:  # nothing read again: the head and the base were there
        assert cache.counts("pull_head") == KindCounts(hits=1, loads=1)
        assert cache.counts("results_by_leg") == KindCounts(hits=1, loads=1)
    else:
        assert cache.counts("pull_head") == KindCounts(loads=1)
        assert cache.counts("results_by_leg") == KindCounts(loads=1)


def test_only_the_most_recently_active_pulls_are_primed(
    engine: Engine, db_url: str, token: str, make_client: ClientFactory
) -> None:
    """CPCI_WARM_ON_START_PULLS=2 of 3 PRs: the two with the newest runs; the third loads on
    its first read. The PRs share a base: it is read once."""
    seed(make_client, token, [3, 1, 2])
    app = restarted(engine, db_url, warm_on_start_pulls=2)
    cache: ShardCache = app.state.shard_cache
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/healthz").status_code == 200
        assert cache.counts("pull_head") == KindCounts(loads=2)
        assert cache.counts("results_by_leg") == KindCounts(loads=1, hits=1)
        assert failing(report_of(client, 2)) == [config("c02")]
        assert failing(report_of(client, 1)) == [config("c01")]
        assert cache.counts("pull_head") == KindCounts(hits=2, loads=2)
        assert failing(report_of(client, 3)) == [config("c03")]  # not primed: loaded now
    assert cache.counts("pull_head") == KindCounts(hits=2, loads=3)


def test_pulls_without_a_recent_run_are_not_primed(
    engine: Engine, db_url: str, token: str, make_client: ClientFactory
) -> None:
    seed(make_client, token, [1, 2, 3])
    with engine.begin() as conn:  # PR 2's run was uploaded before CPCI_WARM_ON_START_DAYS
        # Typed, so SQLAlchemy writes the datetime as its column does (sqlite3's own adapter
        # is deprecated since Python 3.12).
        update = sa.text("UPDATE run SET created_at = :when WHERE pull_request = 2")
        conn.execute(
            update.bindparams(sa.bindparam("when", type_=sa.DateTime())),
            {"when": utcnow() - timedelta(days=8)},
        )
    settings = Settings(database_url=db_url, warm_on_start_days=7)
    done = prime(engine, settings, ShardCache())
    assert [str(p) for p in done.primed] == [f"{REPO}#3", f"{REPO}#1"]
    assert done.failed == done.skipped == []


def test_no_more_pulls_are_primed_than_the_cache_keeps(
    engine: Engine, db_url: str, token: str, make_client: ClientFactory
) -> None:
    """A cache of 7 values by shard set keeps two PRs' read models (3 each): a third would push
    the newest out, so CPCI_WARM_ON_START_PULLS=4 primes two."""
    seed(make_client, token, [1, 2, 3])
    settings = Settings(database_url=db_url, warm_on_start_pulls=4)
    cache = ShardCache(max_shard_sets=7)
    done = prime(engine, settings, cache)
    assert [str(p) for p in done.primed] == [f"{REPO}#3", f"{REPO}#2"]
    assert cache.counts("pull_head") == KindCounts(loads=2)


def test_no_pull_is_started_once_the_time_budget_is_spent(
    engine: Engine, db_url: str, token: str, make_client: ClientFactory
) -> None:
    """Each head read "takes" 100 s on the injected clock (moved by the cache's listener), over
    a budget of 20 s: the newest PR is primed, the others are skipped."""
    seed(make_client, token, [1, 2, 3])
    now = [0.0]

    def took_100_s(kind: str, event: CacheEvent) -> None:
        if (kind, event) == ("pull_head", "load"):
            now[0] += 100

    cache = ShardCache(listener=took_100_s)
    settings = Settings(database_url=db_url, warm_on_start_s=20)
    done = prime(engine, settings, cache, clock=lambda: now[0])
    assert [str(p) for p in done.primed] == [f"{REPO}#3"]
    assert [str(p) for p in done.skipped] == [f"{REPO}#2", f"{REPO}#1"]
    assert cache.counts("pull_head") == KindCounts(loads=1)


class FailsFirstHead:
    """A cache listener that makes the first head read fail, like a dropped connection."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, kind: str, event: CacheEvent) -> None:
        if (kind, event) == ("pull_head", "load") and not self.failed:
            self.failed = True
            raise RuntimeError("the database went away")


def test_a_pull_that_fails_to_prime_does_not_stop_start_up(
    engine: Engine,
    db_url: str,
    token: str,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The newest PR's priming raises: it is logged, the next PR is primed, the service starts,
    and the failed PR's report is read (loaded) normally on its first read."""
    caplog.set_level(logging.INFO, logger="cpci.server.crud.prime")
    seed(make_client, token, [7, 8])
    cache = ShardCache(listener=FailsFirstHead())
    app = restarted(engine, db_url, cache)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/healthz").status_code == 200
        assert f"could not prime the report of {REPO}#8" in caplog.text
        assert f"primed the report of {REPO}#7 in" in caplog.text
        assert cache.counts("pull_head") == KindCounts(loads=2)  # the failed one, then #7
        assert failing(report_of(client, 8)) == [config("c08")]
        assert failing(report_of(client, 7)) == [config("c07")]
    assert cache.counts("pull_head") == KindCounts(hits=1, loads=3)
