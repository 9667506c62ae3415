"""The webhook worker's retry policy comes from the service settings (`CPCI_WEBHOOK_*`), and an
injected policy (tests) still wins."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from cpci.server.webhooks.worker import WorkerPolicy

_T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def test_the_worker_retries_as_the_environment_says(
    monkeypatch: pytest.MonkeyPatch, engine: Engine, db_url: str
) -> None:
    monkeypatch.setenv("CPCI_WEBHOOK_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("CPCI_WEBHOOK_BACKOFF_S", "12.5")
    monkeypatch.setenv("CPCI_WEBHOOK_MAX_BACKOFF_S", "40")
    settings = Settings(database_url=db_url, github_webhook_secret=SecretStr("s"))
    app = create_app(settings, engine=engine)
    with TestClient(app):
        policy = app.state.webhook_worker.policy
    assert (policy.max_attempts, policy.backoff_s, policy.max_backoff_s) == (3, 12.5, 40.0)
    # The backoff doubles from the setting; the third failure is the last.
    waits = [policy.retry_at(n, _T0) for n in (1, 2, 3)]
    assert waits == [_T0 + timedelta(seconds=12.5), _T0 + timedelta(seconds=25), None]
    # ... and stops at the cap (here with attempts to spare).
    capped = WorkerPolicy.from_settings(settings.model_copy(update={"webhook_max_attempts": 9}))
    assert capped.retry_at(3, _T0) == _T0 + timedelta(seconds=40)


def test_an_injected_policy_wins_over_the_settings(engine: Engine, db_url: str) -> None:
    injected = WorkerPolicy(max_attempts=2, backoff_s=0.0)
    settings = Settings(
        database_url=db_url, github_webhook_secret=SecretStr("s"), webhook_max_attempts=5
    )
    app = create_app(settings, engine=engine, webhook_policy=injected)
    with TestClient(app):
        assert app.state.webhook_worker.policy is injected


@pytest.mark.parametrize(
    ("name", "value"),
    [("CPCI_WEBHOOK_MAX_ATTEMPTS", "0"), ("CPCI_WEBHOOK_BACKOFF_S", "0")],
)
def test_a_policy_that_never_tries_or_never_waits_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name.removeprefix("CPCI_").lower()):
        Settings()
