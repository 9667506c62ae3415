"""Configs are grouped by world size and backend, in collection order, then chunked."""

from __future__ import annotations

from cpci.runner.planning import ConfigSpec, make_batches
from cpci.runner.protocol import Backend


def spec(name: str, world_size: int, backend: Backend = "gloo") -> ConfigSpec:
    return ConfigSpec(nodeid=name, path="t.py", world_size=world_size, backend=backend, timeout=1.0)


def test_grouped_by_world_size_and_backend_then_chunked() -> None:
    specs = [spec(f"a{i}", 2) for i in range(5)] + [
        spec("b0", 4),
        spec("c0", 2, "nccl"),
        spec("a5", 2),
    ]
    batches = make_batches(specs, batch_size=2)
    assert [(b.world_size, b.backend, [c.nodeid for c in b.configs]) for b in batches] == [
        (2, "gloo", ["a0", "a1"]),
        (2, "gloo", ["a2", "a3"]),
        (2, "gloo", ["a4", "a5"]),
        (4, "gloo", ["b0"]),
        (2, "nccl", ["c0"]),
    ]
    assert [b.index for b in batches] == [0, 1, 2, 3, 4]


def test_batch_size_one_is_one_world_per_config() -> None:
    specs = [spec(f"a{i}", 2) for i in range(3)]
    assert [len(b.configs) for b in make_batches(specs, batch_size=1)] == [1, 1, 1]
