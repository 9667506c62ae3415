"""A cpci service with webhooks on, served by a real uvicorn on 127.0.0.1 over a real SQLite or
PostgreSQL database, talking to the contract-checked fake GitHub; deliveries are GitHub's real
payloads (shared/reference/webhooks), signed with the webhook secret."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.github.retry import RetryPolicy
from cpci.github.webhooks import sign
from cpci.schema import Outcome
from cpci.server import Settings, create_app
from cpci.server.crud.tokens import create_token
from cpci.server.models import WebhookDelivery
from cpci.server.webhooks.worker import WebhookWorker, WorkerPolicy
from tests.builders import envelope, record, upload
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub
from tests.live_server import serve

SECRET = "It's a Secret to Everybody"
HELLO = "Codertocat/Hello-World"
OCTO = "octo-org/octo-repo"
PR_HEAD, PR_BASE = (
    "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    "f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
)
RUN_HEAD = "3484a3fb816e0859fd6e1cea078d76385ff50625"
V1 = "nemo_rl/models/policy/workers/dtensor_policy_worker.py"
V2 = "nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py"
#: Retries due at once, so a test sees every attempt without waiting out a backoff.
FAST_RETRIES = WorkerPolicy(
    max_attempts=3, backoff_s=0.0, poll_s=0.5, github_retry=RetryPolicy(attempts=1)
)
EXAMPLE_RULES = (Path(__file__).parents[2] / "examples" / "cpci.yml").read_text()


@dataclass
class Bot:
    http: httpx.Client
    fake: FakeGitHub
    engine: Engine
    tokens: dict[str, str]
    worker: WebhookWorker

    def deliver(
        self,
        name: str,
        delivery: str,
        *,
        event: str | None = None,
        signature: str | None = "ok",
        body: bytes | None = None,
    ) -> Any:
        """POST a stored payload (or `body`), then wait until the worker has acted on it."""
        body = body if body is not None else (require_reference() / "webhooks" / name).read_bytes()
        headers = {
            "X-GitHub-Event": event or name.split(".")[0],
            "X-GitHub-Delivery": delivery,
            "Content-Type": "application/json",
        }
        if signature is not None:
            headers["X-Hub-Signature-256"] = sign(SECRET, body) if signature == "ok" else signature
        response = self.http.post("/github/webhook", content=body, headers=headers)
        assert self.worker.drain(timeout_s=60), "the webhook worker did not finish in time"
        return response

    def deliveries(self) -> list[tuple[str, str]]:
        with Session(self.engine) as session:
            rows = session.exec(select(WebhookDelivery)).all()
            return [(r.delivery_id, r.status) for r in rows]

    def upload(self, repo: str, commit: str, outcomes: dict[str, Outcome], **fields: Any) -> None:
        results = [
            record(name, outcome, rank=1, message="@octocat max err 0.3")
            if outcome == "failed"
            else record(name, outcome)
            for name, outcome in outcomes.items()
        ]
        run: dict[str, Any] = {"ci_run_id": f"run-{commit[:6]}", "branch": None, "environment": {}}
        built = envelope(results, repository=repo, commit=commit, **{**run, **fields})
        upload(self.http, built, token=self.tokens[repo])


@contextmanager
def running_bot(
    engine: Engine,
    fake: FakeGitHub,
    *,
    transport: httpx.BaseTransport | None = None,
    policy: WorkerPolicy = FAST_RETRIES,
    **overrides: Any,
) -> Iterator[Bot]:
    """Serve a bot over the migrated database behind `engine` until the block ends (a restart is
    two blocks in a row); `transport` defaults to `fake`'s."""
    with Session(engine) as session:
        tokens = {r: create_token(session=session, repository=r).token for r in (HELLO, OCTO)}
        session.commit()
    fields: dict[str, Any] = {
        "database_url": engine.url.render_as_string(hide_password=False),
        "github_webhook_secret": SECRET,
        "github_token": "ghs_test",
        "github_api_url": "http://127.0.0.1",
        "public_url": "https://cpci.example.com",
        "github_bot_login": "cpci-bot[bot]",
    }
    app = create_app(Settings(**(fields | overrides)), engine=engine, webhook_policy=policy)
    app.state.github_transport = transport or fake.transport()
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        # Answered once the app's start-up has run, which is what makes its webhook worker.
        http.get("/healthz").raise_for_status()
        yield Bot(http, fake, engine, tokens, app.state.webhook_worker)
