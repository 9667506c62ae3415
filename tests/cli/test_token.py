"""`cpci token` on a first try: on a fresh database `create` migrates it itself and says so;
nothing else makes a database file, and a failure leaves none behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.cli import main
from cpci.server.crud import tokens


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "fresh" / "cpci.db"
    path.parent.mkdir()
    monkeypatch.setenv("CPCI_DATABASE_URL", f"sqlite:///{path}")
    return path


def test_create_on_a_fresh_database_migrates_it_first_and_says_so(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "create", "acme/attn", "--scope", "branch"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("cpci_")
    assert "was empty: applied its migrations first" in err
    assert main(["db", "current"]) == 0
    assert "(up to date)" in capsys.readouterr().out
    assert main(["token", "create", "acme/attn"]) == 0
    assert "applied its migrations" not in capsys.readouterr().err  # only an empty one


@pytest.mark.parametrize("action", [["list", "acme/attn"], ["revoke", "1"]])
def test_reading_a_database_that_is_not_there_makes_no_file(
    database: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    assert main(["token", *action]) == 1
    assert f"there is no database at {database}" in capsys.readouterr().err
    assert list(database.parent.iterdir()) == []


def test_a_bad_repository_name_touches_no_database(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["token", "create", "not-a-repo"]) == 2
    assert "needs OWNER/REPO, got 'not-a-repo'" in capsys.readouterr().err
    assert list(database.parent.iterdir()) == []


def test_a_failure_after_making_the_database_removes_it(
    database: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**_: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(tokens, "create_token", refuse)
    assert main(["token", "create", "acme/attn"]) == 1
    assert "cpci token: the disk is full" in capsys.readouterr().err
    assert list(database.parent.iterdir()) == []
