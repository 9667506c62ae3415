"""`cpci token create --scope`: the safer `pr` by default, said so; the listing shows scopes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpci.cli import main


def test_tokens_default_to_pr_scope_and_the_listing_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CPCI_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["db", "upgrade"]) == 0
    assert main(["token", "create", "acme/attn", "--name", "prs"]) == 0
    assert "scope pr (PR runs only)" in capsys.readouterr().err
    assert (
        main(["token", "create", "acme/attn", "--name", "main", "--scope", "branch", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["scope"] == "branch"
    assert main(["token", "list", "acme/attn"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[-1] for line in listed] == ["scope=pr", "scope=branch"]
    with pytest.raises(SystemExit):
        main(["token", "create", "acme/attn", "--scope", "admin"])
    assert "invalid choice: 'admin'" in capsys.readouterr().err
