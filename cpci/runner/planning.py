"""Turning collected pytest items into configs and groups, without running any test body.

A config is a test item marked `@pytest.mark.cpci(world_size=N)`. Configs are grouped by world
size and backend, in collection order; each group is a queue that long-lived worlds of that size
take configs from (`cpci.runner.scheduler`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from cpci.runner.protocol import BACKENDS, Backend
from cpci.runner.testcases import HARNESS_CASE
from cpci.schema import MAX_NODEID_LENGTH, JSONScalar

MARKER = "cpci"
MARKER_HELP = (
    "cpci(world_size=N, timeout=SECONDS, backend=NAME): run this test on every rank of an "
    "N-process torch.distributed world, sharing worlds with other configs of its world size"
)
_MARKER_KEYS = {"world_size", "timeout", "backend"}


class PlanningError(ValueError):
    """One config cannot be planned; it fails alone with this message."""


@dataclass(frozen=True)
class ConfigSpec:
    """What the parent knows of one config: enough to schedule and report it."""

    nodeid: str
    path: str
    world_size: int
    backend: Backend
    timeout: float
    params: dict[str, JSONScalar] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """Configs that may share a world: same world size, same backend, in collection order.

    A config's position in `configs` is its plan index.
    """

    index: int
    world_size: int
    backend: Backend
    configs: tuple[ConfigSpec, ...]


def spec_for(item: pytest.Item, *, default_timeout: float, backend: Backend) -> ConfigSpec | None:
    """The config for a marked item, None for an unmarked one; PlanningError if the mark is bad.

    With `--cpci-testcases=shared`, an unmarked test of torch's multi-process harnesses is planned
    as if marked with the world size of its class (`cpci.runner.testcases`).
    """
    mark = item.get_closest_marker(MARKER)
    if mark is None:
        case = item.stash.get(HARNESS_CASE, None)
        if case is None:
            return None
        if case.error is not None:
            raise PlanningError(case.error)
        timeout = {} if case.timeout is None else {"timeout": case.timeout}
        mark = pytest.mark.cpci(world_size=case.world_size, **timeout).mark
    kwargs: dict[str, Any] = dict(mark.kwargs)
    if mark.args:
        if len(mark.args) > 1 or "world_size" in kwargs:
            raise PlanningError(f"cpci marker takes world_size once, got args {mark.args!r}")
        kwargs["world_size"] = mark.args[0]
    unknown = set(kwargs) - _MARKER_KEYS
    if unknown:
        raise PlanningError(
            f"cpci marker got unknown argument(s) {sorted(unknown)}; "
            f"it takes {sorted(_MARKER_KEYS)}"
        )
    world_size = kwargs.get("world_size")
    if isinstance(world_size, str):
        world_size = _world_size_parameter(item, world_size)
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise PlanningError(
            f"cpci marker needs world_size=<int >= 1>, got {world_size!r}: "
            'write @pytest.mark.cpci(world_size=2), or world_size="num_gpus" to take it from '
            "the test's parameter num_gpus"
        )
    timeout = kwargs.get("timeout", default_timeout)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise PlanningError(f"cpci marker timeout must be seconds > 0, got {timeout!r}")
    chosen_backend = kwargs.get("backend", backend)  # the session's backend is already resolved
    if chosen_backend not in BACKENDS:
        raise PlanningError(
            f"cpci marker backend must be one of {', '.join(BACKENDS)}, got {chosen_backend!r}"
        )
    _check_nodeid(item.nodeid)
    return ConfigSpec(
        nodeid=item.nodeid,
        path=str(item.path),
        world_size=world_size,
        backend=chosen_backend,
        timeout=float(timeout),
        params=_params(item),
    )


def _check_nodeid(nodeid: str) -> None:
    """A config's node id must fit a results line: checked here, so that config fails alone."""
    fix = "give its parameters shorter ids (pytest.param(..., id=...) or parametrize(ids=...))"
    if len(nodeid) > MAX_NODEID_LENGTH:
        raise PlanningError(
            f"node id is {len(nodeid)} characters, the results' limit is {MAX_NODEID_LENGTH}: {fix}"
        )
    if "\x00" in nodeid:
        raise PlanningError(f"node id holds a NUL character, which results cannot store: {fix}")


def _world_size_parameter(item: pytest.Item, name: str) -> int:
    """The world size a `world_size="name"` mark takes from the config's parameter `name`.

    TransformerEngine-style suites parametrize the GPU count (`num_gpus`); naming the parameter
    spares them a `pytest.param(n, marks=...)` per case.
    """
    callspec = getattr(item, "callspec", None)
    params: dict[str, Any] = {} if callspec is None else callspec.params
    if name not in params:
        have = ", ".join(sorted(params)) or "none"
        raise PlanningError(
            f"cpci marker world_size={name!r} names a parameter {item.name} does not have "
            f"(its parameters: {have}); parametrize it, e.g. "
            f'@pytest.mark.parametrize("{name}", [2, 4]), or give world_size=<int>'
        )
    value = params[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlanningError(
            f"cpci marker world_size={name!r}: parameter {name} of {item.name} is {value!r} "
            f"({type(value).__name__}), a world size must be an int >= 1"
        )
    return value


def _params(item: pytest.Item) -> dict[str, JSONScalar]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    out: dict[str, JSONScalar] = {}
    for name, value in callspec.params.items():
        is_scalar = value is None or isinstance(value, (str, int, float, bool))
        out[name] = value if is_scalar else repr(value)
    return out


def make_groups(specs: list[ConfigSpec]) -> list[Group]:
    """Group by (world size, backend), groups and their configs in first-seen order."""
    members: dict[tuple[int, Backend], list[ConfigSpec]] = {}
    for spec in specs:
        members.setdefault((spec.world_size, spec.backend), []).append(spec)
    return [
        Group(index, world_size, backend, tuple(configs))
        for index, ((world_size, backend), configs) in enumerate(members.items())
    ]
