"""Which SDPA backends to allow, by device, CP size, mode, head dims, determinism and dtype.

Each rule comes from an incident, and each is a row of the table test (`tests/cp/test_backend.py`):
- cp > 1: only FLASH and EFFICIENT. cuDNN SDPA crashed under CP on H100 (the ring calls it with
  shapes and strides it mishandles), and MATH would silently materialise the full score matrix.
- FLASH on CUDA needs fp16/bf16, head dims <= 256 and equal QK and V head dims; otherwise
  EFFICIENT (or MATH when cp == 1) serves.
- Deterministic mode disables FA3 only when TRAINING with head_dim_qk > 128: FA3's backward for
  large head dims accumulates dQ with atomics. Its forward is deterministic, so inference keeps
  FA3; disabling it there cost throughput for nothing.
- CPU has FLASH (its own kernel, any float dtype) and MATH.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

CUDA_ORDER = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
CPU_ORDER = ("FLASH_ATTENTION", "MATH")
CP_ALLOWED = frozenset({"FLASH_ATTENTION", "EFFICIENT_ATTENTION"})
FLASH_DTYPES = (torch.float16, torch.bfloat16)
FLASH_MAX_HEAD_DIM = 256
FA3_DETERMINISTIC_MAX_HEAD_DIM = 128


@dataclass(frozen=True)
class AttentionRequest:
    """What the policy needs to know about one attention call site."""

    device: str
    cp_size: int
    training: bool
    head_dim_qk: int
    head_dim_v: int
    deterministic: bool = False
    dtype: Any = torch.bfloat16

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', got {self.device!r}")
        if self.cp_size < 1:
            raise ValueError(f"cp_size must be >= 1, got {self.cp_size}")
        if self.head_dim_qk < 1 or self.head_dim_v < 1:
            raise ValueError(
                f"head dims must be >= 1, got qk {self.head_dim_qk}, v {self.head_dim_v}"
            )


@dataclass(frozen=True)
class BackendChoice:
    """Allowed SDPA backends in priority order, whether FA3 may serve FLASH, and why."""

    backends: tuple[str, ...]
    allow_fa3: bool
    reasons: tuple[str, ...] = field(default=())


def choose_backends(request: AttentionRequest) -> BackendChoice:
    """The ordered backends to allow for `request` (never empty), with the rules that applied."""
    reasons: list[str] = []
    order = list(CUDA_ORDER if request.device == "cuda" else CPU_ORDER)
    if request.cp_size > 1:
        order = [b for b in order if b in CP_ALLOWED]
        reasons.append("cp > 1: only FLASH and EFFICIENT (cuDNN SDPA crashes under CP on H100)")
    if request.device == "cuda" and "FLASH_ATTENTION" in order:
        if request.dtype not in FLASH_DTYPES:
            order.remove("FLASH_ATTENTION")
            reasons.append(f"FLASH needs fp16/bf16 on CUDA, got {request.dtype}")
        elif max(request.head_dim_qk, request.head_dim_v) > FLASH_MAX_HEAD_DIM:
            order.remove("FLASH_ATTENTION")
            reasons.append(f"FLASH supports head dims <= {FLASH_MAX_HEAD_DIM}")
        elif request.head_dim_qk != request.head_dim_v:
            order.remove("FLASH_ATTENTION")
            reasons.append("FLASH needs equal QK and V head dims")
    assert order, "EFFICIENT (CUDA) and FLASH (CPU) have no exclusion rule"
    allow_fa3 = request.device == "cuda" and "FLASH_ATTENTION" in order
    if (
        allow_fa3
        and request.deterministic
        and request.training
        and request.head_dim_qk > FA3_DETERMINISTIC_MAX_HEAD_DIM
    ):
        allow_fa3 = False
        reasons.append(
            f"deterministic training with head_dim_qk > {FA3_DETERMINISTIC_MAX_HEAD_DIM}: "
            "FA3's backward is not deterministic"
        )
    return BackendChoice(tuple(order), allow_fa3, tuple(reasons))


@contextlib.contextmanager
def apply_backends(choice: BackendChoice) -> Iterator[None]:
    """Restrict SDPA to `choice.backends` in that priority order for the `with` block.

    FA3 is only ever switched off here (the default FLASH serves instead) and back on after the
    block, never switched on: turning it on is the user's opt-in
    (`torch.nn.attention.activate_flash_attention_impl`).
    """
    from torch.nn.attention import (
        SDPBackend,
        activate_flash_attention_impl,
        current_flash_attention_impl,
        restore_flash_attention_impl,
        sdpa_kernel,
    )

    backends = [getattr(SDPBackend, name) for name in choice.backends]
    suspend_fa3 = not choice.allow_fa3 and current_flash_attention_impl() == "FA3"
    if suspend_fa3:
        restore_flash_attention_impl()
    try:
        with sdpa_kernel(backends, set_priority=True):
            yield
    finally:
        if suspend_fa3:
            activate_flash_attention_impl("FA3")


def backends_in_force() -> frozenset[str]:
    """The SDPA backends torch may pick right now (its global flags), by `SDPBackend` name.

    What a test reads inside an attention call to see that the policy, not the default, rules.
    """
    flags = {
        "FLASH_ATTENTION": torch.backends.cuda.flash_sdp_enabled,
        "EFFICIENT_ATTENTION": torch.backends.cuda.mem_efficient_sdp_enabled,
        "CUDNN_ATTENTION": torch.backends.cuda.cudnn_sdp_enabled,
        "MATH": torch.backends.cuda.math_sdp_enabled,
    }
    return frozenset(name for name, enabled in flags.items() if enabled())


def attention_policy(
    *, device: Any, cp_size: int, head_dim: int, dtype: Any, training: bool = True
) -> contextlib.AbstractContextManager[None]:
    """The policy for one CP attention site, entered: wrap every CP attention call in it.

    Determinism comes from torch's own switch (`torch.use_deterministic_algorithms`), so a
    deterministic run gets the FA3 rule without passing anything.
    """
    request = AttentionRequest(
        device=torch.device(device).type,
        cp_size=cp_size,
        training=training,
        head_dim_qk=head_dim,
        head_dim_v=head_dim,
        deterministic=torch.are_deterministic_algorithms_enabled(),
        dtype=dtype,
    )
    return apply_backends(choose_backends(request))
