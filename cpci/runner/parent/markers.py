"""Which cpci options apply to a test item: every cpci marker on it, merged, nearest first.

A suite marks tests at several levels at once: TransformerEngine's shape is a function-level
`@pytest.mark.cpci(world_size="num_gpus")` with `pytest.param(..., marks=pytest.mark.cpci(
timeout=10))` on the config that may hang. Reading only the closest marker would drop one of
them (the hanging config would run for the default timeout), so each option is taken from the
nearest marker that sets it: the parameter's marks, then the function's (bottom decorator
first, the order pytest stores them in), then the class's, the module's (`pytestmark`), then any
a plugin put on a directory. That is pytest's own `iter_markers` order, except that pytest files
a parameter's marks on the function, after the function's own; here they come first, since they
are the more specific. Two markers at the same level giving one option different values cannot be
merged: that is a `PlanningError` naming the test, rather than one of them silently winning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from _pytest.nodes import Node  # pytest exports its subclasses, not the base

MARKER = "cpci"
MARKER_HELP = (
    "cpci(world_size=N, timeout=SECONDS, backend=NAME): run this test on every rank of an "
    "N-process torch.distributed world, sharing worlds with other configs of its world size; "
    "markers at several levels (parameter, function, class, module) merge, the nearest winning"
)
#: The options a cpci marker takes.
MARKER_KEYS = ("world_size", "timeout", "backend")


class PlanningError(ValueError):
    """One config cannot be planned; it fails alone with this message."""


@dataclass(frozen=True)
class MarkedOptions:
    """The options an item's cpci markers give, and for each the marker it came from."""

    marked: bool  # whether any cpci marker applies (one may set nothing: `@pytest.mark.cpci`)
    values: dict[str, Any]
    sources: dict[str, str]  # option -> e.g. "the parameter's cpci marker"


def marked_options(item: pytest.Item) -> MarkedOptions:
    """The merge of every cpci marker on `item`, nearest first; PlanningError on a conflict."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    found = False
    for where, marks in _levels(item):
        level: dict[str, Any] = {}
        for mark in marks:
            found = True
            for key, value in _options(mark, item).items():
                if key in level and level[key] != value:
                    raise PlanningError(
                        f"cpci markers of {item.name} conflict: {where} sets {key}={level[key]!r} "
                        f"and {key}={value!r}; keep one of them"
                    )
                level[key] = value
        for key, value in level.items():
            if key not in values:
                values[key] = value
                sources[key] = where
    return MarkedOptions(found, values, sources)


def _levels(item: pytest.Item) -> list[tuple[str, list[pytest.Mark]]]:
    """The item's cpci marks grouped by where they were given, nearest first."""
    callspec = getattr(item, "callspec", None)
    from_params = [] if callspec is None else [m for m in callspec.marks if m.name == MARKER]
    levels = [("the parameter's cpci marker", from_params)]
    for node in item.iter_parents():
        own = [
            m for m in node.own_markers if m.name == MARKER and not any(m is p for p in from_params)
        ]
        levels.append((f"{_describe(node, item)}'s cpci marker", own))
    return [(where, marks) for where, marks in levels if marks]


def _describe(node: Node, item: pytest.Item) -> str:
    if node is item:
        return str(getattr(item, "originalname", item.name))
    if isinstance(node, pytest.Class):
        return f"class {node.name}"
    if isinstance(node, pytest.Module):
        return f"module {node.name}"
    return f"{type(node).__name__.lower()} {node.name}"  # a marker a plugin put on a directory


def _options(mark: pytest.Mark, item: pytest.Item) -> dict[str, Any]:
    """One marker's options by name (`cpci(2)` is `cpci(world_size=2)`)."""
    kwargs = dict(mark.kwargs)
    if mark.args:
        if len(mark.args) > 1 or "world_size" in kwargs:
            raise PlanningError(
                f"cpci marker of {item.name} takes world_size once, got args {mark.args!r}"
            )
        kwargs["world_size"] = mark.args[0]
    unknown = set(kwargs) - set(MARKER_KEYS)
    if unknown:
        raise PlanningError(
            f"cpci marker of {item.name} got unknown argument(s) {sorted(unknown)}; "
            f"it takes {sorted(MARKER_KEYS)}"
        )
    return kwargs
