"""Configs are grouped by world size and backend, in collection order: one queue per group."""

from __future__ import annotations

from cpci.runner.planning import ConfigSpec, make_groups
from cpci.runner.protocol import Backend


def spec(name: str, world_size: int, backend: Backend = "gloo") -> ConfigSpec:
    return ConfigSpec(nodeid=name, path="t.py", world_size=world_size, backend=backend, timeout=1.0)


def test_grouped_by_world_size_and_backend_in_first_seen_order() -> None:
    specs = [spec(f"a{i}", 2) for i in range(5)] + [
        spec("b0", 4),
        spec("c0", 2, "nccl"),
        spec("a5", 2),
    ]
    groups = make_groups(specs)
    assert [(g.world_size, g.backend, [c.nodeid for c in g.configs]) for g in groups] == [
        (2, "gloo", ["a0", "a1", "a2", "a3", "a4", "a5"]),
        (4, "gloo", ["b0"]),
        (2, "nccl", ["c0"]),
    ]
    assert [g.index for g in groups] == [0, 1, 2]


def test_no_configs_no_groups() -> None:
    assert make_groups([]) == []
