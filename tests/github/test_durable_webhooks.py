"""Webhook work is durable: stored before the 202, done by the worker thread, retried, resumed
after a restart, redone on GitHub's manual redelivery, never redone for a replayed body. Real
uvicorn on 127.0.0.1, real SQLite (and PostgreSQL for the claims between replicas)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.github.webhooks import sign
from cpci.server.core.db import create_db_engine, writer
from cpci.server.core.migrate import upgrade
from cpci.server.crud import github as queue
from cpci.server.models import WebhookDelivery, as_utc, utcnow
from cpci.server.webhooks.worker import WorkerPolicy
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub
from tests.github.service_bot import HELLO, PR_BASE, PR_HEAD, SECRET, running_bot

OPENED = "pull_request.opened.payload.json"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    require_reference()
    engine = create_db_engine(f"sqlite:///{tmp_path / 'cpci.db'}")
    upgrade(engine)
    yield engine
    engine.dispose()


def _row(engine: Engine, delivery: str) -> WebhookDelivery:
    with Session(engine) as session:
        row: WebhookDelivery = session.exec(
            select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery)
        ).one()
        return row


def _opened_payload() -> dict[str, object]:
    data: dict[str, object] = json.loads((require_reference() / "webhooks" / OPENED).read_text())
    return data


def test_the_202_comes_before_any_github_call(engine: Engine) -> None:
    """GitHub is stuck: the request still answers at once, the worker waits, then finishes."""
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    release, reached = threading.Event(), threading.Event()

    def stuck(request: httpx.Request) -> httpx.Response:
        reached.set()
        assert release.wait(60), "the test never released GitHub"
        return fake.handle(request)

    with running_bot(engine, fake, transport=httpx.MockTransport(stuck)) as bot:
        body = (require_reference() / "webhooks" / OPENED).read_bytes()
        headers = {
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": sign(SECRET, body),
        }
        response = bot.http.post("/github/webhook", content=body, headers=headers)
        assert (response.status_code, response.json()["status"]) == (202, "queued")
        assert reached.wait(60), "the worker never called GitHub"
        assert bot.deliveries() == [("d-1", "running")]
        again = bot.http.post("/github/webhook", content=body, headers=headers)
        assert (again.status_code, again.json()["status"]) == (202, "queued")
        assert bot.deliveries() == [("d-1", "running")]  # left to the worker that holds it
        release.set()
        assert bot.worker.drain(timeout_s=60)
        assert bot.deliveries() == [("d-1", "done")]
        assert len(fake.comments[(HELLO, 2)]) == 1
        assert fake.calls.count(("GET", f"/repos/{HELLO}/pulls/2")) == 1


def test_a_github_outage_is_retried_by_the_worker(engine: Engine) -> None:
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    fake.fail("GET", r"/pulls/2$", 502, times=2)  # two attempts fail, the third gets through
    with running_bot(engine, fake) as bot:
        assert bot.deliver(OPENED, "d-1").status_code == 202
        assert bot.deliveries() == [("d-1", "done")]
        assert _row(engine, "d-1").attempts == 3
        assert len(fake.comments[(HELLO, 2)]) == 1


def test_spent_retries_leave_it_failed_and_a_redelivery_redoes_it(engine: Engine) -> None:
    """GitHub's manual "Redeliver" sends the same GUID: it must not be answered 'duplicate'."""
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    fake.fail("GET", r"/pulls/2$", 503, times=3)
    with running_bot(engine, fake) as bot:
        bot.deliver(OPENED, "d-1")
        row = _row(engine, "d-1")
        assert (row.status, row.attempts) == ("failed", 3)
        assert "gave up; redeliver from GitHub" in (row.detail or "")
        assert (HELLO, 2) not in fake.comments
        again = bot.deliver(OPENED, "d-1")
        assert (again.status_code, again.json()["status"]) == (202, "queued")
        assert bot.deliveries() == [("d-1", "done")]
        assert len(fake.comments[(HELLO, 2)]) == 1
        finished = bot.deliver(OPENED, "d-1")
        assert (finished.status_code, finished.json()["status"]) == (200, "duplicate")


def test_a_permanent_failure_is_not_retried(engine: Engine) -> None:
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    fake.fail("POST", "/comments$", 403, message="Resource not accessible by integration")
    with running_bot(engine, fake) as bot:
        bot.deliver(OPENED, "d-1")
    row = _row(engine, "d-1")
    assert (row.status, row.attempts) == ("failed", 1)


def test_work_left_by_a_stopped_service_is_done_at_the_next_start(engine: Engine) -> None:
    """A delivery stored but never worked (the process died after the 202), and one whose worker
    died mid-task (its lease lapsed), are both picked up when a service starts."""
    an_hour_ago = utcnow() - timedelta(hours=1)
    with Session(engine) as session:
        for delivery in ("d-queued", "d-crashed"):
            queue.record_webhook_delivery(
                session=session,
                delivery_id=delivery,
                event="pull_request",
                action="opened",
                status="queued",
                digest=delivery,
                payload=_opened_payload(),
                now=an_hour_ago,
            )
    with Session(writer(engine)) as session:  # a worker that died an hour ago holding its claim
        assert queue.claim_webhook_delivery(session=session, now=an_hour_ago, lease_s=60)
    assert {_row(engine, d).status for d in ("d-queued", "d-crashed")} == {"queued", "running"}
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    with running_bot(engine, fake) as bot:
        assert bot.worker.drain(timeout_s=60)
        assert sorted(bot.deliveries()) == [("d-crashed", "done"), ("d-queued", "done")]


def test_a_replayed_body_under_a_fresh_guid_is_not_acted_on(engine: Engine) -> None:
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    with running_bot(engine, fake) as bot:
        assert bot.deliver(OPENED, "d-1").status_code == 202
        calls = len(fake.calls)
        replay = bot.deliver(OPENED, "d-2")
        assert (replay.status_code, replay.json()["status"]) == (200, "replay")
        assert len(fake.calls) == calls
        assert bot.deliveries() == [("d-1", "done")]


def test_a_body_over_the_cap_is_refused_before_it_is_read(engine: Engine) -> None:
    """413 from Content-Length alone (the body is never sent), and while streaming one without."""
    with running_bot(engine, FakeGitHub(), max_upload_bytes=4096) as bot:
        port = httpx.URL(str(bot.http.base_url)).port
        with socket.create_connection(("127.0.0.1", port or 0), timeout=30) as sock:
            sock.sendall(
                b"POST /github/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: d-big\r\n"
                b"Content-Length: 26214401\r\n\r\n"
            )
            status_line = sock.recv(4096).split(b"\r\n", 1)[0]
        # The phrase is the Python's own (3.13 says "Content Too Large", as RFC 9110 does).
        assert status_line.split(b" ", 2)[:2] == [b"HTTP/1.1", b"413"], status_line

        def chunks() -> Iterator[bytes]:
            for _ in range(4):
                yield b"x" * 2048

        streamed = bot.http.post(
            "/github/webhook", content=chunks(), headers={"X-GitHub-Event": "ping"}
        )
        assert streamed.status_code == 413
        assert "25 MB" in streamed.json()["detail"]
        assert bot.deliveries() == []


def test_the_backoff_doubles_and_stops_after_max_attempts() -> None:
    policy = WorkerPolicy(max_attempts=4, backoff_s=30, max_backoff_s=100)
    now = utcnow()
    waits = [policy.retry_at(n, now) for n in (1, 2, 3, 4)]
    assert [(w - now).total_seconds() if w else None for w in waits] == [30, 60, 100, None]
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        WorkerPolicy(max_attempts=0)


def test_a_long_rate_limit_is_waited_out_between_attempts_not_inside_one(engine: Engine) -> None:
    """GitHub asks for 15 minutes: the client does not sleep (its waits are bounded); the
    delivery is queued again for the worker's next attempt, an hour on, and the worker is free."""
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    fake.fail("POST", "/comments$", 403, headers={"retry-after": "900"}, message="rate limit")
    policy = WorkerPolicy(max_attempts=3, backoff_s=3600, poll_s=0.5)  # default client retries
    before = utcnow()
    with running_bot(engine, fake, policy=policy) as bot:
        bot.deliver(OPENED, "d-1")  # drain() returns: nothing is due for an hour
        row = _row(engine, "d-1")
    assert (row.status, row.attempts) == ("queued", 1)
    assert "attempt 1 of 3" in (row.detail or "")
    assert "rate limit" in (row.detail or "").lower()
    assert row.next_attempt_at is not None
    assert as_utc(row.next_attempt_at) - before >= timedelta(minutes=59)
    assert row.payload is not None  # kept for the next attempt


def test_a_finished_delivery_lets_go_of_its_payload(engine: Engine) -> None:
    fake = FakeGitHub()
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    with running_bot(engine, fake) as bot:
        bot.deliver(OPENED, "d-1")
    row = _row(engine, "d-1")
    assert (row.status, row.payload, row.digest is not None) == ("done", None, True)
