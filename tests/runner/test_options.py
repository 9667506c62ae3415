"""The option vocabularies: what a setting may say before any side acts on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpci.runner.options import parse_durations_source

NEEDS_TORCH = False  # in process, no world (tests/runner/conftest.py)


def test_a_durations_source_is_a_file_or_an_http_url() -> None:
    assert parse_durations_source("https://cpci.example/api/v1/repos/a/b/durations").is_url
    assert parse_durations_source("durations.json").path == Path("durations.json")
    for bad in ("", "ftp://cpci.example/durations"):
        with pytest.raises(ValueError, match="file path or an http"):
            parse_durations_source(bad)
