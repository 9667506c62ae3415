"""Two `cpci serve` replicas on one PostgreSQL behind a round-robin proxy, and what they stored.

`run_replicas` is the whole scenario, shared by `tests/reliability/test_replicas.py` (small) and
`benchmarks/replicas.py` (large): a base run, then 16 shards of one PR run uploaded at once
through the proxy (some sent twice, one shard twice at the same moment), webhook deliveries for
the PR sent through the proxy too (each GUID twice) so both replicas' workers claim them, and
one replica SIGKILLed while an upload is open to it, then started again. Reads go through a
read-only PostgreSQL role (`CPCI_DATABASE_READ_URL`). `ReplicaRun.problems` lists every result
stored other than once, every comment or check run past one, and a PR report that differs
between the replicas; the test asserts it is empty, the benchmark prints it with the figures.
Waits are on observable state (the proxy's open connections, the delivery rows), each bounded
by a deadline.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func
from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

from cpci import urls
from cpci.github.webhooks import sign
from cpci.schema import RunEnvelope
from cpci.server.core.db import create_db_engine
from cpci.server.models import WebhookDelivery
from cpci.upload.send import Backoff, deliver
from cpci.upload.spool import Spool
from tests import builders
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub
from tests.github.service_bot import HELLO, PR_BASE, PR_HEAD, SECRET
from tests.reliability.proxy import RoundRobinProxy, round_robin
from tests.reliability.service import Served, count_stored
from tests.server.databases import drop_role, migrate_with_token, read_only_role

SHARDS = 16
PULL = 2
BOT = "cpci-bot[bot]"
#: One GitHub token per replica, so the fake tells which replica's worker made each call.
TOKENS = ("ghs_replica_a", "ghs_replica_b")
WAIT_S = 120.0
#: More per delivery: one PR's refreshes run one at a time, each reading the whole report.
WAIT_PER_DELIVERY_S = 15.0
ACTIONS = ("opened", "synchronize", "reopened")


class CountingGitHub(FakeGitHub):
    """The fake GitHub, noting which token (so which replica) made each write."""

    def __init__(self) -> None:
        super().__init__(tokens=dict.fromkeys(TOKENS, BOT))
        self.writes_by: dict[str, int] = dict.fromkeys(TOKENS, 0)
        self._lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        with self._lock:  # the fake's state is plain dicts: one request at a time
            if request.method in ("POST", "PATCH"):
                token = request.headers.get("authorization", "").partition(" ")[2]
                if token in self.writes_by:
                    self.writes_by[token] += 1
            return super().handle(request)


@dataclass
class ReplicaRun:
    shards: int
    results_per_shard: int
    deliveries: int
    upload_wall_s: float = 0.0
    webhook_wait_s: float = 0.0
    resends: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    connections: list[int] = field(default_factory=list)
    cut_on_kill: int = 0
    writes_by_replica: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def results(self) -> int:
        return self.shards * self.results_per_shard

    @property
    def results_per_s(self) -> float:
        return self.results / self.upload_wall_s if self.upload_wall_s else 0.0


def shard_envelope(shard: int, results: int) -> RunEnvelope:
    """Shard `shard` of the PR's run: `results` configs of its own, every ninth failing."""
    records = [
        builders.record(
            f"s{shard}-c{i}",
            "failed" if i % 9 == 4 else "passed",
            duration_s=0.01 * (i % 11),
            message="max err 0.3" if i % 9 == 4 else None,
        )
        for i in range(results)
    ]
    return builders.envelope(
        records,
        repository=HELLO,
        commit=PR_HEAD,
        branch=None,
        pull_request=PULL,
        base_commit=PR_BASE,
        ci_run_id="pr-run",
        shard_index=shard,
        shard_total=SHARDS,
    )


def base_envelope(shard: int, results: int) -> RunEnvelope:
    """Shard `shard` of the base branch's run: the same configs as the PR's, passing."""
    records = [builders.record(f"s{shard}-c{i}", "passed") for i in range(results)]
    return builders.envelope(
        records,
        repository=HELLO,
        commit=PR_BASE,
        ci_run_id="base-run",
        shard_index=shard,
        shard_total=SHARDS,
    )


def _delivery(index: int) -> tuple[bytes, dict[str, str]]:
    """Webhook delivery `index` for the PR: a distinct body (a replay of a body is refused),
    signed, under its own GUID."""
    action = ACTIONS[index % len(ACTIONS)]
    name = f"pull_request.{action}.payload.json"
    payload = json.loads((require_reference() / "webhooks" / name).read_text())
    payload["cpci_test_delivery"] = index
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": f"replica-d{index}",
        "X-Hub-Signature-256": sign(SECRET, body),
        "Content-Type": "application/json",
    }
    return body, headers


def _post_delivery(url: str, index: int) -> str:
    """Send delivery `index`; a cut connection (the replica behind it died) is sent again,
    as GitHub redelivers, until a status comes back."""
    body, headers = _delivery(index)
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            response = httpx.post(
                f"{url}/github/webhook", content=body, headers=headers, timeout=30
            )
            if response.status_code in (200, 202):
                return str(response.json()["status"])
            raise AssertionError(f"delivery {index}: {response.status_code} {response.text}")
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # a bounded retry pause, not a synchronisation


def wait_for(what: str, done: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    """Poll `done` until it holds; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(0.02)


def wait_for_deliveries(database_url: str, count: int) -> dict[str, int]:
    """Until `count` webhook deliveries are finished (their rows say so); how many ended how."""
    engine = create_db_engine(database_url)

    def statuses() -> dict[str, int]:
        with Session(engine) as session:
            rows = session.exec(
                select(WebhookDelivery.status, func.count()).group_by(col(WebhookDelivery.status))
            ).all()
        return {status: int(n) for status, n in rows}

    def settled() -> bool:
        ended = statuses()
        return sum(ended.get(s, 0) for s in ("done", "failed", "ignored")) >= count

    try:
        wait_for(
            f"{count} webhook deliveries finished",
            settled,
            WAIT_S + WAIT_PER_DELIVERY_S * count,
        )
        return statuses()
    finally:
        engine.dispose()


@contextmanager
def replicas(
    database_url: str, read_url: str, fake_url: str, logs: Path
) -> Iterator[tuple[list[Served], RoundRobinProxy]]:
    """Two started `cpci serve` processes (the first one migrates) and the proxy before them."""
    common = {
        "CPCI_DATABASE_READ_URL": read_url,
        "CPCI_GITHUB_WEBHOOK_SECRET": SECRET,
        "CPCI_GITHUB_API_URL": fake_url,
        "CPCI_PUBLIC_URL": "https://cpci.example.com",
        "CPCI_GITHUB_BOT_LOGIN": BOT,
        "CPCI_WARM_ON_START_S": "0",
        "CPCI_TRUSTED_BRANCHES": '["main"]',  # the base run's (Hello-World's default: master)
    }
    services = [
        Served(database_url, logs / f"replica-{n}.log", env={**common, "CPCI_GITHUB_TOKEN": t})
        for n, t in enumerate(TOKENS)
    ]
    with ExitStack() as stack:
        for service in services:
            service.start()
            stack.callback(service.stop)
        with round_robin([("127.0.0.1", s.port) for s in services]) as proxy:
            yield services, proxy


def run_replicas(
    postgres_database: str, tmp: Path, *, results: int, deliveries: int, resend_every: int = 4
) -> ReplicaRun:
    """The scenario of the module docstring over the migrated database `postgres_database`."""
    run = ReplicaRun(SHARDS, results, deliveries)
    engine = create_db_engine(postgres_database)
    try:
        token = migrate_with_token(engine, repository=HELLO)
    finally:
        engine.dispose()
    role = f"cpci_reader_{make_url(postgres_database).database}"
    read_url = read_only_role(postgres_database, role)
    fake = CountingGitHub()
    fake.add_pull(HELLO, PULL, head_sha=PR_HEAD, base_sha=PR_BASE)
    try:
        with (
            fake.serve() as fake_url,
            replicas(postgres_database, read_url, fake_url, tmp) as (
                services,
                proxy,
            ),
        ):
            for shard in range(SHARDS):
                based = deliver(
                    services[0].url,
                    lambda: token,
                    base_envelope(shard, results),
                    spool=Spool(tmp / "spool-base"),
                    backoff=Backoff(attempts=3),
                )
                assert based.receipt is not None, f"the base run's shard {shard}: {based.error}"
            _upload_and_deliver(run, services, proxy, token, tmp, resend_every)
            start = time.perf_counter()
            ended = wait_for_deliveries(postgres_database, deliveries + 1)
            if ended != {"done": deliveries + 1}:
                run.problems.append(f"webhook deliveries ended {ended}, want all done")
            run.webhook_wait_s = time.perf_counter() - start
            run.connections = list(proxy.counts.taken)
            _check(run, services, fake, postgres_database)
    finally:
        drop_role(postgres_database, role)
    return run


def _upload_and_deliver(
    run: ReplicaRun,
    services: list[Served],
    proxy: RoundRobinProxy,
    token: str,
    tmp: Path,
    resend_every: int,
) -> None:
    """16 shards at once through the proxy (every `resend_every`-th twice, shard 0 twice at
    the same moment), a SIGKILL of replica 0 while an upload is open to it, its restart, the
    deliveries meanwhile; then one last delivery, after every shard is stored."""
    backoff = Backoff(attempts=12, base_s=0.1, max_s=1.0)
    statuses: list[str] = []
    lock = threading.Lock()

    def send(job: tuple[int, int]) -> None:
        shard, copy = job
        envelope = shard_envelope(shard, run.results_per_shard)
        spool = Spool(tmp / f"spool-{shard}-{copy}")
        sends = 2 if shard % resend_every == 1 else 1
        for _ in range(sends):
            done = deliver(proxy.url, lambda: token, envelope, spool=spool, backoff=backoff)
            with lock:
                statuses.append(done.receipt.status if done.receipt else f"spooled {done.error}")

    def kill_and_restart() -> None:
        wait_for("an upload open to replica 0", lambda: proxy.open_to(0) > 0)
        run.cut_on_kill = proxy.open_to(0)
        services[0].kill()
        services[0].start()

    n = run.deliveries
    jobs = [(s, 0) for s in range(SHARDS)] + [(0, 1)]  # shard 0 twice at once
    run.resends = sum(1 for s in range(SHARDS) if s % resend_every == 1) + 1
    start = time.perf_counter()
    with ThreadPoolExecutor(len(jobs) + 2) as pool:
        killer = pool.submit(kill_and_restart)
        uploads = [pool.submit(send, job) for job in jobs]
        killer.result()
        hooks = list(pool.map(lambda i: _post_delivery(proxy.url, i // 2), range(2 * n)))
        for upload in uploads:
            upload.result()
    run.upload_wall_s = time.perf_counter() - start
    hooks.append(_post_delivery(proxy.url, run.deliveries))  # the verdict with every shard in
    run.statuses = {s: statuses.count(s) for s in sorted(set(statuses))}
    run.statuses |= {f"webhook {s}": hooks.count(s) for s in sorted(set(hooks))}


def _check(run: ReplicaRun, services: list[Served], fake: CountingGitHub, url: str) -> None:
    problems = run.problems
    stored = count_stored(url)
    for shard in range(SHARDS):
        rows = stored.per_shard.get(("pr-run", shard))
        if rows != (run.results_per_shard, run.results_per_shard):
            problems.append(f"shard {shard} of the PR run holds {rows}, want one copy")
    if stored.shards != 2 * SHARDS:
        problems.append(f"{stored.shards} shards stored, want {2 * SHARDS}")
    if stored.results != 2 * run.results:
        problems.append(f"{stored.results} results stored, want {2 * run.results}")
    # An upload stored just before the kill may have lost its answer: its retry is a duplicate.
    receipts = run.statuses.get("stored", 0) + run.statuses.get("duplicate", 0)
    if run.statuses.get("stored", 0) > SHARDS or receipts != SHARDS + run.resends:
        problems.append(f"upload receipts {run.statuses}, want {SHARDS + run.resends} answered")
    if run.statuses.get("webhook replay"):  # each body went out under its own GUID only
        problems.append(f"webhook receipts {run.statuses}: a GUID sent twice taken for a replay")
    comments = fake.comments.get((HELLO, PULL), [])
    if len(comments) != 1:
        problems.append(f"{len(comments)} comments on the PR, want 1")
    checks = [c for c in fake.check_runs.values() if c["head_sha"] == PR_HEAD]
    if len(checks) != 1:
        problems.append(f"{len(checks)} check runs on the PR's head, want 1")
    run.writes_by_replica = [fake.writes_by[t] for t in TOKENS]
    if 0 in run.writes_by_replica:
        problems.append(f"GitHub writes per replica {run.writes_by_replica}: one worker idle")
    reports = [_report(s.url) for s in services]
    if reports[0] != reports[1]:
        problems.append("the PR report differs between the replicas")
    shards, counts = reports[0]["shards"], reports[0]["counts"]
    if (shards["reported"], counts["results"]) != (SHARDS, run.results):
        problems.append(f"the PR report counts {shards} and {counts}, want every shard")
    if checks and checks[0].get("conclusion") != "failure":
        problems.append(f"the check run ended {checks[0].get('conclusion')}, want failure")
    for service in services:  # the pages, read through the read-only role
        for page in (urls.dashboard(HELLO), urls.pull(HELLO, PULL), urls.api_dashboard(HELLO)):
            response = httpx.get(f"{service.url}{page}", timeout=60)
            if response.status_code != 200:
                problems.append(f"page {page}: {response.status_code}")


def _report(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/api/v1/repos/{HELLO}/pulls/{PULL}/report", timeout=60)
    response.raise_for_status()
    report: dict[str, Any] = response.json()
    return report
