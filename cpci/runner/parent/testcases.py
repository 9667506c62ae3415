"""Which unittest cases of torch's multi-process harnesses become cpci configs (the parent's side).

With `--cpci-testcases=shared`, the test methods of classes deriving from
`torch.testing._internal.common_distributed.MultiProcessTestCase` (`DistributedTestBase`,
`DTensorTestBase`, distributed_test's `TestDistBackend`, ...) or `MultiProcContinuousTest` are
planned like `@pytest.mark.cpci(world_size=N)` tests, N taken from the class the way the harness
takes it (`world_size` attribute or property, evaluated on an instance as the harness does; a
`@requires_world_size(n)` method wins). The ranks then run each one as the harness's own
subprocess would (`cpci.runner.rank.testcase_adapter`). cpci markers on a harness test merge with
this: an option a marker sets (world size, timeout, backend) wins over the class's.

Some tests must keep the harness's own spawn, because what they check is how a process ends:
those whose class's `setUp` fills `skip_return_code_checks` or `special_return_code_checks` (the
test methods it names there; every method of the class when it names none), and classes that
replace the harness's spawn/join machinery or never spawn in `setUp`. They run in the parent as
plain unittest tests, exactly as without cpci, whatever cpci markers they carry. Nothing of the
test classes runs here beyond their constructor and `world_size`: the detection reads code, it
does not call `setUp`.
"""

from __future__ import annotations

import inspect
import sys
import unittest
from dataclasses import dataclass
from typing import Any

import pytest

from cpci.runner.harness import HARNESS_MODULE, Family, harness_family

#: Harness methods a class may replace only if it keeps the harness's own spawn.
_SPAWN_MACHINERY = (
    "_spawn_processes",
    "_start_processes",
    "_join_processes",
    "_check_return_codes",
    "join_or_run",
    "run_test",
)
_RETURN_CODE_LISTS = ("skip_return_code_checks", "special_return_code_checks")


@dataclass(frozen=True)
class HarnessCase:
    """What the parent decided for one harness test: its world size, or why it cannot run."""

    family: Family
    world_size: int | None
    error: str | None = None
    timeout: float | None = None  # the harness's own per-test override (TIMEOUT_OVERRIDE), if any
    own_spawn: str | None = None  # why it keeps the harness's own spawn (runs in the parent)


#: Set on every harness item; `planning.spec_for` plans those without `own_spawn` as configs.
HARNESS_CASE = pytest.StashKey[HarnessCase]()


def mark_harness_items(items: list[pytest.Item]) -> list[str]:
    """Stash a `HarnessCase` on every harness item: its world size, or why it keeps its own spawn.

    Returns the node ids left to the harness's own spawn, with the reason, for the plan lines.
    """
    own_spawn: list[str] = []
    for item in items:
        cls: Any = getattr(item, "cls", None)
        family = harness_family(cls)
        if family is None:
            continue
        skipped = _unittest_skip(cls, item.name)
        if skipped is not None:  # as pytest's own skip marks: skipped before planning
            item.add_marker(pytest.mark.skip(reason=skipped))
        reason = own_spawn_reason(cls, item.name, family)
        if reason is not None:
            own_spawn.append(f"{item.nodeid}: {reason}")
            item.stash[HARNESS_CASE] = HarnessCase(family, None, own_spawn=reason)
            continue
        try:
            case = HarnessCase(
                family, harness_world_size(cls, item.name, family), timeout=_timeout(item.name)
            )
        except unittest.SkipTest as exc:  # e.g. a continuous class on a machine without devices
            item.add_marker(pytest.mark.skip(reason=str(exc)))  # skipped before planning
            case = HarnessCase(family, 1)
        except Exception as exc:  # the class's own code: any failure is this config's error
            case = HarnessCase(
                family,
                None,
                f"--cpci-testcases=shared: cannot tell the world size of {cls.__name__} "
                f"({type(exc).__name__}: {exc}); set what its world_size reads (e.g. "
                "WORLD_SIZE), or mark the test @pytest.mark.cpci(world_size=N)",
            )
        item.stash[HARNESS_CASE] = case
    return own_spawn


def _unittest_skip(cls: Any, method: str) -> str | None:
    """The reason of a `unittest.skip`-style mark on the test method or its class, if any.

    torch's `skip_but_pass_in_sandcastle_if` marks the method this way at import time.
    """
    for marked in (getattr(cls, method, None), cls):
        if getattr(marked, "__unittest_skip__", False):
            return str(getattr(marked, "__unittest_skip_why__", "") or "unittest.skip")
    return None


def harness_world_size(cls: type, method: str, family: Family) -> int:
    """The number of processes the harness would spawn for `cls(method)`."""
    module = sys.modules[HARNESS_MODULE]
    if family == "continuous":
        device_type = _continuous_device_type(cls)
        return _as_world_size(cls._get_world_size(device_type))  # type: ignore[attr-defined]
    instance = cls(method)
    # Like the harness's _start_processes: int(self.world_size), which may be a property
    # reading the environment (distributed_test's WORLD_SIZE) or the device count.
    default = _as_world_size(instance.world_size)
    return _as_world_size(module.get_required_world_size(instance, default))


def _timeout(method: str) -> float | None:
    """The harness's timeout for `method` where it overrides its default, like a marker's."""
    module = sys.modules[HARNESS_MODULE]
    seconds = module.get_timeout(method)
    return None if seconds == module.TIMEOUT_DEFAULT else float(seconds)


def _continuous_device_type(cls: Any) -> str:
    """`MultiProcContinuousTest._ensure_processes_spawned`'s reading of `device_type`."""
    attr = cls.__dict__.get("device_type", cls.device_type)
    if isinstance(attr, classmethod):
        return str(attr.__func__(cls))
    if isinstance(attr, property):
        assert attr.fget is not None
        return str(attr.fget(cls))
    return str(attr() if callable(attr) else attr)


def _as_world_size(value: Any) -> int:
    size = int(value)
    if size < 1:
        raise ValueError(f"world_size is {value!r}")
    return size


def own_spawn_reason(cls: Any, method: str, family: Family) -> str | None:
    """Why `cls.method` must keep the harness's own spawn, or None when a cpci world can run it."""
    if family == "continuous":
        return None  # one spawn per class, tests fed over a queue: nothing checks exit codes
    module = sys.modules[HARNESS_MODULE]
    base = module.MultiProcessTestCase
    for name in _SPAWN_MACHINERY:
        if getattr(cls, name, None) is not getattr(base, name):
            return f"keeps its own spawn: {cls.__name__} replaces the harness's {name}"
    setups = [
        k.__dict__["setUp"]
        for k in cls.__mro__
        if "setUp" in k.__dict__ and issubclass(k, base) and k is not base
    ]
    names = {n for setup in setups for n in _code_names(setup)}
    if not names & {"_spawn_processes", "_start_processes"}:
        return f"keeps its own spawn: {cls.__name__}.setUp never spawns the harness's processes"
    lists = names & set(_RETURN_CODE_LISTS)
    if not lists:
        return None
    named = {n for n in names if n.startswith("test") and inspect.isroutine(getattr(cls, n, None))}
    if named and method not in named:
        return None
    return (
        f"keeps its own spawn: {cls.__name__}.setUp puts it in {' / '.join(sorted(lists))} "
        "(the test checks how its processes exit)"
    )


def _code_names(function: Any) -> set[str]:
    """Every global and attribute name `function`'s code (and nested code) refers to."""
    code = getattr(function, "__code__", None)
    if code is None:
        return set()
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if inspect.iscode(c))
    return names
