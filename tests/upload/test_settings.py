"""The uploader's settings: a flag beats its `CPCI_*` variable, which beats the default; an empty
variable counts as unset; a bad value names the flag and the variable; secrets stay out of logs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cpci.upload.errors import CredentialsError
from cpci.upload.settings import UploadSettings, UploadSettingsError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SERVER", "TOKEN", "AUTH", "OIDC_AUDIENCE", "SPOOL"):
        monkeypatch.delenv(f"CPCI_{name}", raising=False)
    monkeypatch.delenv("RUNNER_TEMP", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_a_flag_beats_its_variable_which_beats_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert UploadSettings.from_flags(server=None).server is None
    monkeypatch.setenv("CPCI_SERVER", "http://from-env")
    monkeypatch.setenv("CPCI_OIDC_AUDIENCE", "cpci-prod")
    assert UploadSettings.from_flags(server=None).server == "http://from-env"
    settings = UploadSettings.from_flags(server="http://from-flag", oidc_audience=None)
    assert settings.server == "http://from-flag"
    assert settings.oidc_audience == "cpci-prod"


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_AUTH", "")
    monkeypatch.setenv("CPCI_SERVER", "")
    settings = UploadSettings.from_flags()
    assert settings.auth == "token"
    with pytest.raises(UploadSettingsError, match=r"--server \(or CPCI_SERVER\) is required"):
        settings.require_server()


def test_the_spool_defaults_to_the_jobs_temp_in_actions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert UploadSettings.from_flags().spool == tmp_path / "cache" / "cpci" / "spool"
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "job"))
    assert UploadSettings.from_flags().spool == tmp_path / "job" / "cpci-spool"
    monkeypatch.setenv("CPCI_SPOOL", str(tmp_path / "env"))
    assert UploadSettings.from_flags().spool == tmp_path / "env"
    assert UploadSettings.from_flags(spool=str(tmp_path / "flag")).spool == tmp_path / "flag"


def test_a_bad_value_names_the_flag_the_variable_and_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CPCI_AUTH", "basic")
    with pytest.raises(UploadSettingsError) as excinfo:
        UploadSettings.from_flags()
    assert str(excinfo.value).startswith("--auth (or CPCI_AUTH): Input should be 'token' or 'oidc'")
    assert "got 'basic'" in str(excinfo.value)


def test_the_token_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCI_TOKEN", "cpci_s3cret")
    settings = UploadSettings.from_flags()
    assert "cpci_s3cret" not in repr(settings)
    assert "cpci_s3cret" not in str(settings.model_dump())
    assert settings.token_source({})() == "cpci_s3cret"


def test_each_oidc_bearer_is_asked_for_afresh() -> None:
    """OIDC tokens expire within minutes: a flush after a long upload must not reuse one."""
    minted: list[str] = []

    def mint(request: httpx.Request) -> httpx.Response:
        minted.append(f"oidc-{len(minted)}")
        return httpx.Response(200, json={"value": minted[-1]})

    settings = UploadSettings.from_flags(auth="oidc", oidc_audience="cpci-prod")
    environ = {
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.example/idtoken",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-secret",
    }
    token = settings.token_source(environ, transport=httpx.MockTransport(mint))
    assert [token(), token()] == ["oidc-0", "oidc-1"]
    with pytest.raises(CredentialsError, match="id-token: write"):
        settings.token_source({})()


@pytest.mark.parametrize(
    ("flags", "audience"),
    [
        ({"server": "https://cpci.example.com/"}, "https://cpci.example.com"),
        ({"server": "https://cpci.example.com", "oidc_audience": "cpci-prod"}, "cpci-prod"),
    ],
    ids=["the-server-url", "told"],
)
def test_oidc_tokens_are_asked_for_the_server_url_unless_told(
    flags: dict[str, str], audience: str
) -> None:
    """The service's default audience is its own URL (CPCI_PUBLIC_URL): both sides agree
    without a setting."""
    asked: list[str] = []

    def mint(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params["audience"])
        return httpx.Response(200, json={"value": "oidc"})

    settings = UploadSettings.from_flags(auth="oidc", **flags)
    environ = {
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.example/idtoken?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-secret",
    }
    assert settings.token_source(environ, transport=httpx.MockTransport(mint))() == "oidc"
    assert asked == [audience]
