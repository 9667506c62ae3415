"""The bot's login: given, or asked of GitHub (`GET /app` for an App, `GET /user` for a token);
a comment is never adopted by its marker alone, so someone else's marker comment stays theirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine
from sqlmodel import Session, select

from cpci.github.auth import AppAuth, TokenAuth
from cpci.github.client import GitHubClient
from cpci.github.comment import MARKER
from cpci.github.errors import GitHubError
from cpci.server.core.db import create_db_engine
from cpci.server.core.migrate import upgrade
from cpci.server.models import WebhookDelivery
from tests.github.conftest import FakeClock
from tests.github.contract import require_reference
from tests.github.fake_github import FakeGitHub
from tests.github.service_bot import HELLO, PR_BASE, PR_HEAD, running_bot

FORGED = f"{MARKER} state=success -->\n## ✅ cpci: all good (planted by someone else)"


def app_keys() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem, public.decode()


def test_a_personal_token_is_asked_get_user(clock: FakeClock) -> None:
    fake = FakeGitHub(tokens={"ghp_personal": "octocat"})
    with GitHubClient(
        TokenAuth("ghp_personal"), transport=fake.transport(), clock=clock.clock()
    ) as gh:
        assert gh.bot_login() == "octocat"
    assert fake.calls == [("GET", "/user")]


def test_an_app_is_asked_get_app_with_its_jwt(clock: FakeClock) -> None:
    pem, public = app_keys()
    fake = FakeGitHub(app_public_key=public)
    clock.t = 1_796_126_400.0  # 2026-12-01T11:00:00Z, before the fake's tokens expire
    auth = AppAuth(app_id="12345", private_key=pem, installation_id=42)
    with GitHubClient(auth, transport=fake.transport(), clock=clock.clock()) as gh:
        assert gh.bot_login() == "cpci-app[bot]"
        gh.create_issue_comment(HELLO, 7, "hello")  # and that is who comments
    assert {c["user"]["login"] for c in fake.comments[(HELLO, 7)]} == {"cpci-app[bot]"}


def test_an_installation_token_cannot_tell_and_says_what_to_set(
    fake: FakeGitHub, client: GitHubClient
) -> None:
    with pytest.raises(GitHubError, match="CPCI_GITHUB_BOT_LOGIN") as caught:
        client.bot_login()
    assert "github-actions[bot]" in str(caught.value)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    require_reference()
    engine = create_db_engine(f"sqlite:///{tmp_path / 'cpci.db'}")
    upgrade(engine)
    yield engine
    engine.dispose()


def test_without_a_login_setting_the_service_asks_and_never_adopts_a_stranger(
    engine: Engine,
) -> None:
    fake = FakeGitHub(tokens={"ghp_bot": "cpci-pat-bot", "ghp_mallory": "mallory"})
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    planted = fake.add_comment(HELLO, 2, FORGED, login="mallory")
    with running_bot(engine, fake, github_token="ghp_bot", github_bot_login=None) as bot:
        bot.deliver("pull_request.opened.payload.json", "d-1")
        bot.deliver("pull_request.synchronize.payload.json", "d-2")
        assert bot.deliveries() == [("d-1", "done"), ("d-2", "done")]
    stranger, ours = fake.comments[(HELLO, 2)]
    assert stranger == planted  # untouched
    assert ours["user"]["login"] == "cpci-pat-bot"
    assert fake.calls.count(("GET", "/user")) == 1  # asked once, then remembered


def test_a_token_that_cannot_tell_its_login_publishes_nothing(engine: Engine) -> None:
    fake = FakeGitHub()  # ghs_test: an installation token, GET /user is 403
    fake.add_pull(HELLO, 2, head_sha=PR_HEAD, base_sha=PR_BASE)
    fake.add_comment(HELLO, 2, FORGED, login="mallory")
    with running_bot(engine, fake, github_bot_login=None) as bot:
        bot.deliver("pull_request.opened.payload.json", "d-1")
    with Session(engine) as session:
        row = session.exec(select(WebhookDelivery)).one()
    assert row.status == "failed"
    assert "CPCI_GITHUB_BOT_LOGIN" in (row.detail or "")
    assert [w for w in fake.writes() if "comments" in w[1]] == []
