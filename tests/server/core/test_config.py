"""The settings refuse what would open the service to strangers, naming the settings to fix: OIDC
without an allow-list (or an explicit CPCI_OIDC_ALLOW_ANY_REPOSITORY), OIDC without an audience,
an empty webhook secret; `cpci serve` stops with those lines, and says at start-up whose OIDC
tokens it takes. The OIDC audience is the service's own URL unless told otherwise, end to end."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine

from cpci.server import Settings, create_app
from tests.builders import REPO, envelope, record, send
from tests.server.oidc_keys import Keys, oidc_service

PUBLIC = "https://cpci.example.com"


@pytest.mark.parametrize(
    "settings",
    [
        {"oidc_audience": "cpci"},
        {"oidc_audience": "cpci", "public_url": PUBLIC},
    ],
    ids=["audience", "audience-and-url"],
)
def test_oidc_without_an_allow_list_is_refused_naming_the_settings(
    settings: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**settings)
    message = str(refused.value)
    for name in (
        "CPCI_OIDC_ALLOWED_REPOSITORIES",
        "CPCI_OIDC_ALLOWED_REPOSITORY_IDS",
        "CPCI_OIDC_ALLOW_ANY_REPOSITORY=true",
    ):
        assert name in message


def test_allow_any_contradicts_an_allow_list() -> None:
    with pytest.raises(ValidationError, match="contradicts CPCI_OIDC_ALLOWED_REPOSITORIES"):
        Settings(
            public_url=PUBLIC, oidc_allow_any_repository=True, oidc_allowed_repositories=(REPO,)
        )


def test_an_allow_list_without_an_audience_is_refused_naming_the_public_url() -> None:
    with pytest.raises(ValidationError, match="set CPCI_PUBLIC_URL"):
        Settings(oidc_allowed_repository_ids=(42,))


@pytest.mark.parametrize(
    ("settings", "audience"),
    [
        ({}, None),
        ({"public_url": PUBLIC}, None),  # a URL alone does not turn OIDC on
        ({"public_url": PUBLIC + "/", "oidc_allowed_repositories": (REPO,)}, PUBLIC),
        ({"public_url": PUBLIC, "oidc_allow_any_repository": True}, PUBLIC),
        (
            {"public_url": PUBLIC, "oidc_audience": "cpci", "oidc_allowed_repositories": (REPO,)},
            "cpci",
        ),
    ],
    ids=["off", "url-only", "from-the-url", "allow-any", "explicit"],
)
def test_the_audience_is_the_services_own_url_unless_told(
    settings: dict[str, Any], audience: str | None
) -> None:
    made = Settings(**settings)
    assert made.oidc_token_audience == audience
    assert made.oidc_enabled is (audience is not None)


def test_an_empty_webhook_secret_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_GITHUB_WEBHOOK_SECRET", "")
    with pytest.raises(ValidationError, match="CPCI_GITHUB_WEBHOOK_SECRET is set but empty"):
        Settings()
    monkeypatch.delenv("CPCI_GITHUB_WEBHOOK_SECRET")
    assert Settings().github_webhook_secret is None  # unset: webhooks are off, not open


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CPCI_OIDC_AUDIENCE": "cpci"}, "CPCI_OIDC_ALLOWED_REPOSITORY_IDS"),
        ({"CPCI_GITHUB_WEBHOOK_SECRET": ""}, "CPCI_GITHUB_WEBHOOK_SECRET is set but empty"),
    ],
    ids=["oidc-open-to-anyone", "empty-webhook-secret"],
)
def test_cpci_serve_refuses_to_start_saying_which_setting(
    tmp_path: Any, env: dict[str, str], says: str
) -> None:
    environ = {"PATH": "/usr/bin:/bin", "CPCI_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    done = subprocess.run(
        [sys.executable, "-m", "cpci", "serve"],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists(), "nothing was started or migrated"


@pytest.mark.parametrize(
    ("settings", "level", "says"),
    [
        ({}, logging.INFO, "OIDC uploads are off"),
        (
            {"oidc_allowed_repositories": ("acme/*",), "oidc_allowed_repository_ids": (7,)},
            logging.INFO,
            f"for audience '{PUBLIC}' from acme/*, 7 only",
        ),
        (
            {"oidc_allow_any_repository": True},
            logging.WARNING,
            "from every repository on GitHub (CPCI_OIDC_ALLOW_ANY_REPOSITORY=true)",
        ),
    ],
    ids=["off", "allow-list", "anyone"],
)
def test_start_up_says_whose_oidc_tokens_are_accepted(
    engine: Engine,
    db_url: str,
    caplog: pytest.LogCaptureFixture,
    settings: dict[str, Any],
    level: int,
    says: str,
) -> None:
    app = create_app(Settings(database_url=db_url, public_url=PUBLIC, **settings), engine=engine)
    with caplog.at_level(logging.INFO, logger="cpci.server.app"), TestClient(app):
        pass
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "cpci.server.app"]
    assert [lvl for lvl, _ in said] == [level], said
    assert says in said[0][1]


def test_a_token_minted_for_the_services_url_uploads_and_one_for_cpci_does_not(
    engine: Engine, db_url: str, keys: Keys
) -> None:
    with oidc_service(
        db_url=db_url, keys=keys, engine=engine, oidc_audience=None, public_url=PUBLIC + "/"
    ) as url:

        def post(audience: str) -> httpx.Response:
            bearer = keys.token(aud=audience)
            return send(
                url,
                envelope([record("p2p")]),
                headers={"Authorization": f"Bearer {bearer}"},
            )

        refused = post("cpci")
        assert refused.status_code == 401
        assert f"audience is not '{PUBLIC}'" in refused.json()["detail"]
        assert post(PUBLIC).status_code == 201
