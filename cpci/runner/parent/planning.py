"""Turning collected pytest items into configs and groups, without running any test body.

A config is a test item with cpci markers (merged across levels, `cpci.runner.parent.markers`), or a
test of torch's multi-process harnesses under `--cpci-testcases=shared`. Configs are grouped by
world size and backend, in collection order; each group is a queue that long-lived worlds of
that size take configs from (`cpci.runner.parent.scheduler`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from cpci.runner.parent.markers import PlanningError, marked_options
from cpci.runner.parent.testcases import HARNESS_CASE
from cpci.runner.wire.protocol import BACKENDS, Backend
from cpci.schema import MAX_NODEID_LENGTH, JSONScalar


@dataclass(frozen=True)
class ConfigSpec:
    """What the parent knows of one config: enough to schedule and report it."""

    nodeid: str
    path: str
    world_size: int
    backend: Backend
    timeout: float
    params: dict[str, JSONScalar] = field(default_factory=dict)
    #: Which setting gave `timeout`, as a timeout's message names it.
    timeout_from: str = "--cpci-timeout"


@dataclass(frozen=True)
class Group:
    """Configs that may share a world: same world size, same backend, in collection order.

    A config's position in `configs` is its plan index.
    """

    index: int
    world_size: int
    backend: Backend
    configs: tuple[ConfigSpec, ...]


def spec_for(
    item: pytest.Item, *, default_timeout: float, timeout_from: str, backend: Backend
) -> ConfigSpec | None:
    """The config for an item, None for one that runs in this process; PlanningError if its
    options are bad.

    Its options are the merge of its cpci markers (`cpci.runner.parent.markers`); with
    `--cpci-testcases=shared` a test of torch's multi-process harnesses is a config too, its class
    giving the world size and timeout its markers do not (`cpci.runner.parent.testcases`). The
    session's timeout (`timeout_from` says which setting gave it) and backend fill in the rest.
    """
    marked = marked_options(item)
    case = item.stash.get(HARNESS_CASE, None)
    if case is not None and case.own_spawn is not None:
        return None  # it checks how its processes end: the harness spawns it, as without cpci
    if not marked.marked and case is None:
        return None
    options, sources = dict(marked.values), dict(marked.sources)
    if case is not None and "world_size" not in options:
        if case.error is not None:
            raise PlanningError(case.error)
        options["world_size"] = case.world_size
    if case is not None and case.timeout is not None and "timeout" not in options:
        options["timeout"] = case.timeout
        sources["timeout"] = f"the harness's TIMEOUT_OVERRIDE for {item.name}"
    world_size = options.get("world_size")
    if world_size is None:
        raise PlanningError(
            f"no cpci marker of {item.name} sets world_size (a module's or class's marker "
            "applies to each of its tests): write @pytest.mark.cpci(world_size=2), or "
            'world_size="num_gpus" to take it from the test\'s parameter num_gpus'
        )
    if isinstance(world_size, str):
        world_size = _world_size_parameter(item, world_size)
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise PlanningError(
            f"cpci marker needs world_size=<int >= 1>, got {world_size!r}: "
            'write @pytest.mark.cpci(world_size=2), or world_size="num_gpus" to take it from '
            "the test's parameter num_gpus"
        )
    timeout = options.get("timeout", default_timeout)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise PlanningError(f"cpci marker timeout must be seconds > 0, got {timeout!r}")
    chosen_backend = options.get("backend", backend)  # the session's backend is already resolved
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
        timeout_from=sources.get("timeout", timeout_from),
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
