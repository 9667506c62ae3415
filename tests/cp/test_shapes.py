"""Bad shapes are refused with a ValueError naming the value and the rule."""

from __future__ import annotations

from typing import Any

import pytest

from tests.prerequisites import import_or_skip

torch = import_or_skip("torch", "torch", "the CP reference runs on torch")

from cpci.cp.shapes import check_inputs, from_bhsd, to_bhsd  # noqa: E402


def qkv(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...] | None = None, dtypes: Any = None
) -> tuple[Any, Any, Any]:
    dtypes = dtypes or (torch.float32,) * 3
    shapes = (q_shape, kv_shape or q_shape, kv_shape or q_shape)
    q, k, v = (torch.zeros(s, dtype=d) for s, d in zip(shapes, dtypes, strict=True))
    return q, k, v


@pytest.mark.parametrize(
    ("tensors", "kwargs", "message"),
    [
        (qkv((1, 3, 4, 8)), {}, "divisible by 2\\*cp = 4: .* got 3 \\(global 6\\)"),
        (
            qkv((1, 4, 3, 8)),
            {"head_split": 2},
            "query heads \\(3\\) must be divisible by the a2a size 2",
        ),
        (qkv((1, 4, 4, 8), (1, 4, 3, 8)), {}, "multiple of key/value heads .* got 4 and 3"),
        (
            qkv((1, 4, 4, 8), dtypes=(torch.float32, torch.bfloat16, torch.float32)),
            {},
            "share one dtype, got torch.float32, torch.bfloat16, torch.float32",
        ),
        (qkv((1, 4, 4, 8), dtypes=(torch.float64,) * 3), {}, "dtype must be one of"),
        (qkv((4, 4, 8)), {}, "q must be 4-d \\(bshd\\), got shape \\(4, 4, 8\\)"),
        (qkv((1, 4, 4, 8)), {"layout": "bhsd"}, "layout must be one of .* got 'bhsd'"),
        (qkv((1, 4, 4, 8), (1, 6, 4, 8)), {}, "agree in batch and sequence"),
        (qkv((1, 4, 4, 8), (1, 4, 4, 16)), {}, "share the head dim, got 8 and 16"),
    ],
)
def test_bad_inputs(tensors: tuple[Any, Any, Any], kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"layout": "bshd", "cp_size": 2, "load_balance": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        check_inputs(*tensors, **args)


def test_good_inputs_and_shape() -> None:
    q, k, v = qkv((2, 6, 4, 8), (2, 6, 2, 8))
    shape = check_inputs(q, k, v, layout="bshd", cp_size=3, load_balance=False, head_split=2)
    assert (shape.batch, shape.seq_local, shape.heads_q, shape.group_size) == (2, 6, 4, 2)


@pytest.mark.parametrize("layout", ["bshd", "sbhd"])
def test_layout_round_trip(layout: Any) -> None:
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(from_bhsd(to_bhsd(x, layout), layout), x)
    assert to_bhsd(x, layout).shape == ((2, 4, 3, 5) if layout == "bshd" else (3, 4, 2, 5))
