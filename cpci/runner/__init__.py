"""The batched distributed test runner (a pytest plugin); see `cpci.runner.plugin`.

The package is four sides: `parent` (the pytest process: planning, scheduling, worlds, reports),
`rank` (each process of a world), `wire` (what they exchange) and `launch` (how ranks start), with
the option vocabularies (`options`) and the harness classes (`harness`) below them all. What users
import is here: `DistContext`, the `cpci_dist` fixture's value. It is loaded on first use, so
that importing one side (the torchrun shim's stdlib-only start included) loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpci.runner.rank.dist import DistContext

__all__ = ["DistContext"]


def __getattr__(name: str) -> Any:
    if name == "DistContext":
        from cpci.runner.rank.dist import DistContext

        return DistContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
