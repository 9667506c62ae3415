"""The attention block every CP algorithm is built from: forward with log-sum-exp, its
backward, and the online-softmax merge of partial results.

Everything is computed in fp32 whatever the input dtype: this is an oracle, and the algorithms
cast once at the end. A block is attention of some queries against some keys under an optional
boolean mask (True = may attend). Because `lse` is returned, blocks over disjoint key sets can be
merged exactly (`merge_partials`), and the backward of a block needs only the final `out` and
`lse` of the whole row, not the block's own: that is what lets ring attention recompute blocks
one at a time in the backward.

Legend: B batch, Hq query heads, Hkv key/value heads, Sq query tokens, Sk key tokens,
D head dim (Dv for values).
"""

from __future__ import annotations

from typing import Any

import torch


def causal_mask(q_pos_Sq: Any, k_pos_Sk: Any) -> Any:
    """Mask for causal attention by global position: a query sees keys at or before it."""
    return k_pos_Sk.unsqueeze(0) <= q_pos_Sq.unsqueeze(1)


def expand_kv(x_BHkvSD: Any, group_size: int) -> Any:
    """Repeat each key/value head for the `group_size` query heads that share it (GQA/MQA)."""
    if group_size == 1:
        return x_BHkvSD
    b, hkv, s, d = x_BHkvSD.shape
    return x_BHkvSD.unsqueeze(2).expand(b, hkv, group_size, s, d).reshape(b, hkv * group_size, s, d)


def reduce_kv(grad_BHqSD: Any, group_size: int) -> Any:
    """Sum the gradients of repeated key/value heads back onto each shared head."""
    if group_size == 1:
        return grad_BHqSD
    b, hq, s, d = grad_BHqSD.shape
    return grad_BHqSD.view(b, hq // group_size, group_size, s, d).sum(2)


def _safe(lse_BHSq: Any) -> Any:
    # Fully masked rows have lse = -inf; subtracting 0 instead keeps their weights at exp(-inf).
    return torch.where(torch.isneginf(lse_BHSq), torch.zeros_like(lse_BHSq), lse_BHSq)


def _scores(q_BHqSqD: Any, k_BHkvSkD: Any, mask_SqSk: Any, scale: float) -> Any:
    group_size = q_BHqSqD.shape[1] // k_BHkvSkD.shape[1]
    k_BHqSkD = expand_kv(k_BHkvSkD.float(), group_size)
    s_BHqSqSk = torch.matmul(q_BHqSqD.float(), k_BHqSkD.transpose(-1, -2)) * scale
    if mask_SqSk is not None:
        s_BHqSqSk = s_BHqSqSk.masked_fill(~mask_SqSk, float("-inf"))
    return s_BHqSqSk


def block_forward(
    q_BHqSqD: Any, k_BHkvSkD: Any, v_BHkvSkDv: Any, mask_SqSk: Any, scale: float
) -> tuple[Any, Any]:
    """Attention of one block: (out, lse) in fp32, out normalised within the block.

    `mask_SqSk` is None for full attention. Rows with no visible key get out 0, lse -inf, which
    `merge_partials` treats as "no contribution".
    """
    s_BHqSqSk = _scores(q_BHqSqD, k_BHkvSkD, mask_SqSk, scale)
    lse_BHqSq = torch.logsumexp(s_BHqSqSk, dim=-1)
    p_BHqSqSk = torch.exp(s_BHqSqSk - _safe(lse_BHqSq).unsqueeze(-1))
    v_BHqSkDv = expand_kv(v_BHkvSkDv.float(), q_BHqSqD.shape[1] // v_BHkvSkDv.shape[1])
    return torch.matmul(p_BHqSqSk, v_BHqSkDv), lse_BHqSq


def block_backward(
    dout_BHqSqDv: Any,
    q_BHqSqD: Any,
    k_BHkvSkD: Any,
    v_BHkvSkDv: Any,
    out_BHqSqDv: Any,
    lse_BHqSq: Any,
    mask_SqSk: Any,
    scale: float,
    delta_BHqSq: Any = None,
) -> tuple[Any, Any, Any]:
    """This block's share of (dq, dk, dv), in fp32, given the FINAL out and lse of the rows.

    The probabilities of the block are recomputed as exp(s - lse) with the row's final lse, so
    they are already normalised over all blocks; summing the results over blocks gives the exact
    gradient. `delta` = rowsum(dout * out) may be passed in to avoid recomputing it per block.
    """
    group_size = q_BHqSqD.shape[1] // k_BHkvSkD.shape[1]
    dout_BHqSqDv = dout_BHqSqDv.float()
    if delta_BHqSq is None:
        delta_BHqSq = (dout_BHqSqDv * out_BHqSqDv.float()).sum(-1)
    s_BHqSqSk = _scores(q_BHqSqD, k_BHkvSkD, mask_SqSk, scale)
    p_BHqSqSk = torch.exp(s_BHqSqSk - _safe(lse_BHqSq.float()).unsqueeze(-1))
    v_BHqSkDv = expand_kv(v_BHkvSkDv.float(), group_size)
    k_BHqSkD = expand_kv(k_BHkvSkD.float(), group_size)
    dv_BHqSkDv = torch.matmul(p_BHqSqSk.transpose(-1, -2), dout_BHqSqDv)
    dp_BHqSqSk = torch.matmul(dout_BHqSqDv, v_BHqSkDv.transpose(-1, -2))
    ds_BHqSqSk = p_BHqSqSk * (dp_BHqSqSk - delta_BHqSq.unsqueeze(-1)) * scale
    dq_BHqSqD = torch.matmul(ds_BHqSqSk, k_BHqSkD)
    dk_BHqSkD = torch.matmul(ds_BHqSqSk.transpose(-1, -2), q_BHqSqD.float())
    return dq_BHqSqD, reduce_kv(dk_BHqSkD, group_size), reduce_kv(dv_BHqSkDv, group_size)


def merge_partials(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any) -> tuple[Any, Any]:
    """Combine attention over two disjoint key sets into attention over their union.

    Online softmax: each partial is weighted by its share exp(lse_part - lse) of the total mass.
    """
    lse = torch.logaddexp(lse_a, lse_b)
    safe = _safe(lse)
    weight_a = torch.exp(lse_a - safe).unsqueeze(-1)
    weight_b = torch.exp(lse_b - safe).unsqueeze(-1)
    return out_a * weight_a + out_b * weight_b, lse


def empty_partial(q_BHqSqD: Any, head_dim_v: int) -> tuple[Any, Any]:
    """The merge identity: no keys seen yet (out 0, lse -inf)."""
    b, h, s, _ = q_BHqSqD.shape
    out = torch.zeros(b, h, s, head_dim_v, dtype=torch.float32, device=q_BHqSqD.device)
    lse = torch.full((b, h, s), float("-inf"), dtype=torch.float32, device=q_BHqSqD.device)
    return out, lse


class LocalAttention(torch.autograd.Function):
    """Attention of all local queries over all local keys (a2a's inner step), one block."""

    @staticmethod
    def forward(
        ctx: Any, q_BHqSD: Any, k_BHkvSD: Any, v_BHkvSDv: Any, mask_SS: Any, scale: float
    ) -> Any:
        out_BHqSDv, lse_BHqS = block_forward(q_BHqSD, k_BHkvSD, v_BHkvSDv, mask_SS, scale)
        ctx.save_for_backward(q_BHqSD, k_BHkvSD, v_BHkvSDv, out_BHqSDv, lse_BHqS, mask_SS)
        ctx.scale = scale
        return out_BHqSDv.to(q_BHqSD.dtype)

    @staticmethod
    def backward(ctx: Any, dout_BHqSDv: Any) -> tuple[Any, ...]:
        q, k, v, out, lse, mask = ctx.saved_tensors
        dq, dk, dv = block_backward(dout_BHqSDv, q, k, v, out, lse, mask, ctx.scale)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None
