"""The service commands (`cpci db`, `cpci token`, `cpci serve`) refuse settings that do not
validate in one line naming the setting and its value, before touching any database."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.cli import main

COMMANDS = [
    ["db", "current"],
    ["db", "upgrade"],
    ["token", "create", "acme/attn"],
    ["token", "list", "acme/attn"],
    ["serve", "--port", "8000"],
]
BAD = [
    (
        "CPCI_OIDC_ALLOWED_REPOSITORIES",
        "acme/attn",
        "CPCI_OIDC_ALLOWED_REPOSITORIES is not valid JSON",
    ),
    (
        "CPCI_OIDC_JWKS_CACHE_S",
        "soon",
        "CPCI_OIDC_JWKS_CACHE_S='soon': Input should be a valid number",
    ),
    ("CPCI_OIDC_AUDIENCE", "https://cpci.example.com", "set CPCI_OIDC_ALLOWED_REPOSITORIES"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize(("variable", "value", "says"), BAD, ids=[b[0] for b in BAD])
def test_bad_service_settings_are_one_line_naming_the_setting(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    variable: str,
    value: str,
    says: str,
) -> None:
    database = tmp_path / "cpci.db"
    monkeypatch.setenv("CPCI_DATABASE_URL", f"sqlite:///{database}")
    monkeypatch.setenv(variable, value)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    assert err.startswith(f"cpci {command[0]}: ")
    assert says in err
    assert list(tmp_path.iterdir()) == []  # no database was made or migrated


def test_an_option_is_named_as_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "current", "--database-url", "mysql://db/cpci"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cpci db: --database-url='mysql://db/cpci': ")
    assert "must start with sqlite:// or postgresql://" in err
