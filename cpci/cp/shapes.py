"""Layouts and input checks shared by every CP attention algorithm.

Users pass tensors in one of two layouts; the algorithms work in BHSD internally, because the
matmuls want heads as a batch dimension and the sequence next to the head dimension.

Legend: B batch, S sequence (the local shard unless said otherwise), H heads (Hq query heads,
Hkv key/value heads), D head dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

Layout = Literal["bshd", "sbhd"]
LAYOUTS: tuple[Layout, ...] = ("bshd", "sbhd")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def seq_dim(layout: Layout) -> int:
    """The sequence dimension of a tensor in `layout`."""
    return 1 if layout == "bshd" else 0


def to_bhsd(x: Any, layout: Layout) -> Any:
    """A view of `x` (in `layout`) as B, H, S, D."""
    return x.permute(0, 2, 1, 3) if layout == "bshd" else x.permute(1, 2, 0, 3)


def from_bhsd(x_BHSD: Any, layout: Layout) -> Any:
    """A view of a BHSD tensor in `layout` (the inverse of `to_bhsd`)."""
    return x_BHSD.permute(0, 2, 1, 3) if layout == "bshd" else x_BHSD.permute(2, 0, 1, 3)


@dataclass(frozen=True)
class AttentionShape:
    """The dimensions of one attention call, read from checked inputs."""

    batch: int
    seq_local: int
    heads_q: int
    heads_kv: int
    head_dim_qk: int
    head_dim_v: int

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1 for MHA, Hq for MQA)."""
        return self.heads_q // self.heads_kv


def check_inputs(
    q: Any,
    k: Any,
    v: Any,
    *,
    layout: str,
    cp_size: int,
    load_balance: bool,
    head_split: int = 1,
) -> AttentionShape:
    """Validate the local shards given to a CP algorithm; ValueError naming the rule otherwise.

    `head_split` is how many ways the heads are cut by an all-to-all (a2a, a2a+p2p).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if cp_size < 1:
        raise ValueError(f"cp size must be >= 1, got {cp_size}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != 4:
            raise ValueError(f"{name} must be 4-d ({layout}), got shape {tuple(x.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}; "
            "cast them before the call"
        )
    if q.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {q.dtype}")
    q_BHSD, k_BHSD, v_BHSD = (to_bhsd(x, layout) for x in (q, k, v))
    b, hq, s, dqk = q_BHSD.shape
    _, hkv, skv, dk = k_BHSD.shape
    if k_BHSD.shape[:3] != v_BHSD.shape[:3]:
        raise ValueError(
            f"k and v must agree in batch, heads and sequence, got {tuple(k.shape)} and "
            f"{tuple(v.shape)} ({layout})"
        )
    if k_BHSD.shape[0] != b or skv != s:
        raise ValueError(
            f"q and k/v must agree in batch and sequence, got {tuple(q.shape)} and "
            f"{tuple(k.shape)} ({layout})"
        )
    if dk != dqk:
        raise ValueError(f"q and k must share the head dim, got {dqk} and {dk}")
    if hq % hkv != 0:
        raise ValueError(
            f"query heads must be a multiple of key/value heads (GQA/MQA), got {hq} and {hkv}"
        )
    if load_balance and s % 2 != 0:
        raise ValueError(
            f"head-tail load balancing needs the sequence divisible by 2*cp = {2 * cp_size}: "
            f"the local shard must hold an even number of tokens, got {s} "
            f"(global {s * cp_size})"
        )
    if hq % head_split != 0:
        raise ValueError(
            f"all-to-all attention splits heads {head_split} ways: query heads ({hq}) must be "
            f"divisible by the a2a size {head_split}; use p2p or all_gather for this shape"
        )
    return AttentionShape(b, s, hq, hkv, dqk, v_BHSD.shape[-1])


def default_scale(head_dim: int, scale: float | None) -> float:
    """The softmax scale: `scale` if given, else 1/sqrt(head_dim) as in SDPA."""
    return float(scale) if scale is not None else head_dim**-0.5


# attend(q_BHqSD, k_BHkvSD, v_BHkvSDv, scale, shape) -> out_BHqSDv
BHSDAttention = Callable[[Any, Any, Any, float, AttentionShape], Any]


def attend_in_layout(
    q: Any,
    k: Any,
    v: Any,
    *,
    layout: str,
    cp_size: int,
    load_balance: bool,
    scale: float | None,
    attend: BHSDAttention,
    head_split: int = 1,
) -> Any:
    """Check the shards, run `attend` on BHSD views with the resolved scale, answer in `layout`.

    The one front door of every algorithm: what they share is checked and converted here.
    """
    shape = check_inputs(
        q, k, v, layout=layout, cp_size=cp_size, load_balance=load_balance, head_split=head_split
    )
    layout_: Layout = "bshd" if layout == "bshd" else "sbhd"
    q_BHqSD, k_BHkvSD, v_BHkvSDv = (to_bhsd(x, layout_) for x in (q, k, v))
    out_BHqSDv = attend(
        q_BHqSD, k_BHkvSD, v_BHkvSDv, default_scale(shape.head_dim_qk, scale), shape
    )
    return from_bhsd(out_BHqSDv, layout_)
