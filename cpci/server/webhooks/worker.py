"""The webhook worker: one background thread per app that works off the stored deliveries.

The webhook route only stores a delivery and wakes the worker, so a request thread never waits
on GitHub (nor on its rate limits). The worker claims due deliveries one at a time from the
database, so work survives restarts (queued rows, and running rows whose lease lapsed, are
picked up at start) and several replicas share one PostgreSQL queue without doing a row twice.
A transient failure is retried with exponential backoff up to `max_attempts` (settings
`CPCI_WEBHOOK_MAX_ATTEMPTS`, `CPCI_WEBHOOK_BACKOFF_S`, `CPCI_WEBHOOK_MAX_BACKOFF_S`); a permanent
one, or the last attempt, leaves the delivery `failed` with its reason, for GitHub's manual
redelivery to retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from cpci.github.retry import RetryPolicy
from cpci.server.core.config import Settings
from cpci.server.core.db import writer
from cpci.server.crud import github as queue
from cpci.server.crud.github import QueuedWebhookDelivery
from cpci.server.models import utcnow
from cpci.server.webhooks.handling import WORKER_RETRY, Outcome

log = logging.getLogger(__name__)
Handler = Callable[[QueuedWebhookDelivery], Outcome]


@dataclass(frozen=True)
class WorkerPolicy:
    """Retries: attempt n (1-based) that fails transiently is due again after
    `backoff_s * 2**(n-1)` seconds (at most `max_backoff_s`); `lease_s` is how long a claim
    holds before another worker may take the delivery over; `poll_s` bounds the idle wait, so
    work queued by another replica is noticed. `github_retry` is the GitHub client's own,
    short, policy within one attempt: a long outage or rate limit is the worker's to wait out,
    between attempts, never a sleep inside one."""

    max_attempts: int = 8
    backoff_s: float = 30.0
    max_backoff_s: float = 3600.0
    lease_s: float = 300.0
    poll_s: float = 5.0
    github_retry: RetryPolicy = WORKER_RETRY

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"WorkerPolicy.max_attempts must be >= 1, got {self.max_attempts}")

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerPolicy:
        """The retry policy an operator set (`CPCI_WEBHOOK_*`); the rest keeps its defaults."""
        return cls(
            max_attempts=settings.webhook_max_attempts,
            backoff_s=settings.webhook_backoff_s,
            max_backoff_s=settings.webhook_max_backoff_s,
        )

    def retry_at(self, attempts: int, now: datetime) -> datetime | None:
        """When to try again after `attempts` failed attempts; None once they are spent."""
        if attempts >= self.max_attempts:
            return None
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempts - 1))
        return now + timedelta(seconds=delay)


class WebhookWorker:
    """`start()`, `wake()` after storing a delivery, `stop()`; `drain()` for tests and shutdown
    hooks that must know the due work is done."""

    def __init__(
        self,
        engine: Engine,
        handler: Handler,
        *,
        policy: WorkerPolicy | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._engine, self._handler = writer(engine), handler
        self.policy = policy or WorkerPolicy()
        self._clock = clock
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._state = threading.Condition()
        self._asked = 0  # drain() tickets handed out
        self._idle_for = 0  # the latest ticket after which a pass found nothing due
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the webhook worker is already started")
        self._thread = threading.Thread(target=self._run, name="cpci-webhook-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Finish the delivery in hand, then stop; what is queued waits for the next start."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def wake(self) -> None:
        """Look for due work now rather than at the next poll."""
        self._wake.set()

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every delivery due now is finished (or queued for a later retry); False
        when `timeout_s` passed first."""
        with self._state:
            self._asked += 1
            ticket = self._asked
        self._wake.set()
        with self._state:
            return self._state.wait_for(lambda: self._idle_for >= ticket, timeout_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # a wake() from here on ends the coming idle wait early
            with self._state:
                ticket = self._asked  # a pass that starts now sees what drain() callers stored
            try:
                if self._work_one():
                    continue
                wait = self._idle_wait()
            except Exception:  # the database went away: log, wait a poll, carry on
                log.exception("the webhook worker could not reach the database")
                self._stopping.wait(self.policy.poll_s)
                continue
            with self._state:
                self._idle_for = max(self._idle_for, ticket)
                self._state.notify_all()
            self._wake.wait(wait)

    def _work_one(self) -> bool:
        with Session(self._engine) as session:
            claimed = queue.claim_webhook_delivery(
                session=session, now=self._clock(), lease_s=self.policy.lease_s
            )
        if claimed is None:
            return False
        try:
            outcome = self._handler(claimed)
        except Exception as exc:  # a bug in the handler must not kill the worker
            log.exception("webhook delivery %s raised", claimed.delivery_id)
            outcome = Outcome("failed", f"internal error: {exc!r}", retryable=True)
        retry_at = (
            self.policy.retry_at(claimed.attempts, self._clock()) if outcome.retryable else None
        )
        detail = outcome.detail
        if outcome.retryable:
            detail = f"attempt {claimed.attempts} of {self.policy.max_attempts}: {detail}" + (
                "" if retry_at else " (gave up; redeliver from GitHub to try again)"
            )
        with Session(self._engine) as session:
            queue.finish_webhook_delivery(
                session=session,
                delivery_id=claimed.delivery_id,
                status="done" if outcome.status == "done" else "failed",
                detail=detail,
                retry_at=retry_at,
            )
        return True

    def _idle_wait(self) -> float:
        with Session(self._engine) as session:
            due = queue.next_due(session=session)
        if due is None:
            return self.policy.poll_s
        # a floor: a due row another replica holds locked must not make this loop spin
        return max(0.1, min(self.policy.poll_s, (due - self._clock()).total_seconds()))
