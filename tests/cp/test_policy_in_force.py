"""`attention_policy` puts the backend policy in force, and the bundled training runs under it.

The suite side (every CP algorithm and adapter through the harness) is
`cpci/suites/cp/test_backend_policy.py`; here, in one process: the context itself, and the
training example's SDPA, whose flags and actually dispatched kernel are read back.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.prerequisites import import_or_skip

torch = import_or_skip("torch", "torch", "the CP reference runs on torch")

from cpci.cp import train_example  # noqa: E402
from cpci.cp.backend import attention_policy, backends_in_force  # noqa: E402

ALL = frozenset({"FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"})


@pytest.mark.parametrize(
    ("device", "cp", "dtype", "expected"),
    [
        ("cpu", 2, torch.float32, {"FLASH_ATTENTION"}),
        ("cpu", 1, torch.float32, {"FLASH_ATTENTION", "MATH"}),
        ("cuda", 2, torch.bfloat16, {"FLASH_ATTENTION", "EFFICIENT_ATTENTION"}),
        ("cuda", 2, torch.float32, {"EFFICIENT_ATTENTION"}),  # no fp32 FLASH on CUDA
    ],
)
def test_policy_sets_torch_flags_and_restores_them(
    device: str, cp: int, dtype: Any, expected: set[str]
) -> None:
    assert backends_in_force() == ALL
    with attention_policy(device=device, cp_size=cp, head_dim=64, dtype=dtype):
        assert backends_in_force() == expected
    assert backends_in_force() == ALL


def test_policy_restores_flags_after_an_error() -> None:
    with (
        pytest.raises(RuntimeError, match="inside"),
        attention_policy(device="cpu", cp_size=2, head_dim=8, dtype=torch.float32),
    ):
        raise RuntimeError("inside")
    assert backends_in_force() == ALL


def test_training_example_attention_runs_under_the_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cp 1 on CPU: FLASH and MATH allowed, and torch's CPU flash kernel is what ran."""
    seen: list[frozenset[str]] = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(backends_in_force())
        return real_sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        train_example.train(1)
    assert seen == [frozenset({"FLASH_ATTENTION", "MATH"})] * train_example.TinyConfig.layers
    ops = {event.name for event in profile.events() if "scaled_dot_product" in event.name}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops, ops
    assert backends_in_force() == ALL


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_kernel_run_under_cp_policy_is_flash_or_efficient(dtype: Any) -> None:
    """On a GPU, the SDPA kernel actually launched under the cp 2 policy (read from the
    profiler) is FLASH or EFFICIENT, never cuDNN, for shapes cuDNN would take by default."""
    q_BHSD = torch.randn(2, 8, 512, 128, device="cuda", dtype=dtype, requires_grad=True)
    with (
        attention_policy(device="cuda", cp_size=2, head_dim=128, dtype=dtype),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile,
    ):
        out = torch.nn.functional.scaled_dot_product_attention(
            q_BHSD, q_BHSD, q_BHSD, is_causal=True
        )
        out.sum().backward()
    ops = {event.name for event in profile.events() if "scaled_dot_product" in event.name}
    assert not any("cudnn" in op or "math" in op for op in ops), ops
    expected = "flash" if dtype == torch.bfloat16 else "efficient"
    assert any(expected in op for op in ops), ops
