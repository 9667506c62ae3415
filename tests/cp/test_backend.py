"""Every rule of the SDPA backend policy, one table row each."""

from __future__ import annotations

import pytest

from tests.prerequisites import import_or_skip

torch = import_or_skip("torch", "torch", "the CP reference runs on torch")

from cpci.cp.backend import (  # noqa: E402
    AttentionRequest,
    BackendChoice,
    apply_backends,
    choose_backends,
)

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
ALL_CUDA = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")

# device, cp, training, dqk, dv, deterministic, dtype -> backends, allow_fa3
# (one row per rule, kept as a table: `fmt: skip` below stops the formatter exploding the rows)
TABLE = [
    pytest.param("cuda", 1, True, 128, 128, False, BF16, ALL_CUDA, True, id="cuda-cp1-all"),
    pytest.param(
        "cuda", 2, True, 128, 128, False, BF16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), True, id="cp2-no-cudnn-no-math",
    ),
    pytest.param(
        "cuda", 8, False, 64, 64, False, F16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), True, id="cp8-inference-same-rule",
    ),
    pytest.param(
        "cuda", 2, True, 128, 128, False, F32, ("EFFICIENT_ATTENTION",), False,
        id="cp2-fp32-efficient-only",
    ),
    pytest.param(
        "cuda", 1, True, 64, 64, False, F32,
        ("CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH"), False, id="cp1-fp32-no-flash",
    ),
    pytest.param(
        "cuda", 2, True, 512, 512, False, BF16, ("EFFICIENT_ATTENTION",), False,
        id="head-dim-over-flash-limit",
    ),
    pytest.param(
        "cuda", 2, True, 192, 128, False, BF16, ("EFFICIENT_ATTENTION",), False,
        id="unequal-qk-v-dims",
    ),
    pytest.param(
        "cuda", 2, True, 192, 192, True, BF16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), False, id="det-train-hdim192-no-fa3",
    ),
    pytest.param(
        "cuda", 2, False, 192, 192, True, BF16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), True, id="det-inference-keeps-fa3",
    ),
    pytest.param(
        "cuda", 2, True, 128, 128, True, BF16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), True, id="det-train-hdim128-keeps-fa3",
    ),
    pytest.param(
        "cuda", 2, True, 192, 192, False, BF16,
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION"), True, id="nondet-train-hdim192-keeps-fa3",
    ),
    pytest.param("cpu", 1, True, 8, 8, False, F32, ("FLASH_ATTENTION", "MATH"), False, id="cpu"),
    pytest.param("cpu", 2, True, 8, 8, False, BF16, ("FLASH_ATTENTION",), False, id="cpu-cp2"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("device", "cp", "training", "dqk", "dv", "deterministic", "dtype", "expected", "fa3"), TABLE
)
def test_policy_table(
    device: str,
    cp: int,
    training: bool,
    dqk: int,
    dv: int,
    deterministic: bool,
    dtype: object,
    expected: tuple[str, ...],
    fa3: bool,
) -> None:
    request = AttentionRequest(device, cp, training, dqk, dv, deterministic, dtype)
    choice = choose_backends(request)
    assert (choice.backends, choice.allow_fa3) == (expected, fa3)
    if cp > 1:
        assert "CUDNN_ATTENTION" not in choice.backends
        assert any("cuDNN" in reason for reason in choice.reasons)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "tpu"}, "device must be 'cuda' or 'cpu', got 'tpu'"),
        ({"cp_size": 0}, "cp_size must be >= 1, got 0"),
        ({"head_dim_qk": 0}, "head dims must be >= 1"),
    ],
)
def test_bad_request(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "device": "cpu",
        "cp_size": 1,
        "training": True,
        "head_dim_qk": 8,
        "head_dim_v": 8,
    }
    with pytest.raises(ValueError, match=message):
        AttentionRequest(**{**base, **kwargs})  # type: ignore[arg-type]


def test_apply_restricts_sdpa_and_restores() -> None:
    from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends

    before = set(_cur_sdpa_kernel_backends())
    with apply_backends(BackendChoice(("MATH",), allow_fa3=False)):
        assert _cur_sdpa_kernel_backends() == [SDPBackend.MATH]
        q = torch.randn(1, 2, 8, 8)
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert set(_cur_sdpa_kernel_backends()) == before
    assert out.shape == q.shape
