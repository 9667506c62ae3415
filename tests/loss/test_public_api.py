"""`cpci.loss`'s public surface: everything in `__all__` exists, nothing else is exported."""

from __future__ import annotations

import types

import cpci.cp
import cpci.loss


def test_all_is_exactly_the_public_surface() -> None:
    for package in (cpci.loss, cpci.cp):
        public = {
            name
            for name, value in vars(package).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert set(package.__all__) == public, package.__name__
