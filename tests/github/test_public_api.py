"""The packages' public surfaces: everything in `__all__` exists, and nothing else is exported
by accident (names without an underscore that are not modules)."""

from __future__ import annotations

import types

import pytest

import cpci.github
import cpci.upload


@pytest.mark.parametrize("package", [cpci.github, cpci.upload])
def test_all_is_exactly_the_public_surface(package: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(package.__all__) == public
