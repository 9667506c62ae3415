"""Configs are grouped by world size and backend, in collection order: one queue per group; a
config whose node id no results line can hold fails alone, at planning."""

from __future__ import annotations

import pytest

from cpci.runner.parent.planning import ConfigSpec, make_groups
from cpci.runner.wire.protocol import Backend


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


def test_a_node_id_too_long_for_the_results_fails_its_config_alone(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cpci(world_size=2)
        @pytest.mark.parametrize("case", ["x" * 2000, "short"], ids=["x" * 2000, "short"])
        def test_cases(case, cpci_dist):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*node id is 2??? characters, the results' limit is 2000: give its parameters "
            "shorter ids (pytest.param(..., id=...) or parametrize(ids=...))*"
        ]
    )
