"""The project's own pyproject.toml as tests read it: `tomllib` from 3.11 on, `tomli` before."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def pyproject() -> dict[str, Any]:
    """pyproject.toml's tables, read afresh (a test may compare them with what it installs)."""
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
