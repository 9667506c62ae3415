"""README.md says what the code does: the service settings table is the code's own."""

from __future__ import annotations

from pathlib import Path

from cpci.server.core.config import reference_markdown

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_service_settings_table_matches_the_code() -> None:
    start = README.index("<!-- settings:begin -->\n") + len("<!-- settings:begin -->\n")
    end = README.index("<!-- settings:end -->")
    assert README[start:end] == reference_markdown(), (
        "README.md's settings table is out of date: paste cpci.server.core.config."
        "reference_markdown() between the settings markers"
    )


def test_quick_start_has_the_two_commands() -> None:
    quick = README[README.index("## Quick start") : README.index("## The batched runner")]
    assert "make demo" in quick
    assert "make test" in quick
