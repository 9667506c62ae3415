"""All-gather context-parallel attention: gather K/V, attend locally, reduce-scatter dK/dV.

The simplest CP algorithm and the easiest to trust: every rank gathers the whole K/V (in
rank-major order), builds the causal mask from the global positions of its queries and of the
gathered keys (`SequenceBalancer`), and runs one attention block. Its cost is a full-sequence K/V
per rank, which is why the ring exists.

Legend: B batch, Hq/Hkv query/key-value heads, S local sequence, T gathered sequence (cp * S),
D head dim, Dv value head dim.
"""

from __future__ import annotations

from typing import Any

import torch

from cpci.cp.balancer import SequenceBalancer
from cpci.cp.comm import all_gather_seq, group_rank_and_size, reduce_scatter_seq
from cpci.cp.kernel import block_backward, block_forward, causal_mask
from cpci.cp.shapes import Layout, attend_in_layout


class _AllGatherAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        q_BHqSD: Any,
        k_BHkvSD: Any,
        v_BHkvSDv: Any,
        group: Any,
        causal: bool,
        load_balance: bool,
        scale: float,
    ) -> Any:
        rank, size = group_rank_and_size(group)
        k_BHkvTD = all_gather_seq(k_BHkvSD, group)
        v_BHkvTDv = all_gather_seq(v_BHkvSDv, group)
        mask_ST = None
        if causal:
            balancer = SequenceBalancer(k_BHkvTD.shape[2], size, head_tail=load_balance)
            mask_ST = causal_mask(balancer.positions(rank), balancer.shard_indices())
            mask_ST = mask_ST.to(q_BHqSD.device)
        out_BHqSDv, lse_BHqS = block_forward(q_BHqSD, k_BHkvTD, v_BHkvTDv, mask_ST, scale)
        ctx.save_for_backward(q_BHqSD, k_BHkvTD, v_BHkvTDv, out_BHqSDv, lse_BHqS, mask_ST)
        ctx.group, ctx.scale, ctx.kv_dtype = group, scale, v_BHkvSDv.dtype
        return out_BHqSDv.to(q_BHqSD.dtype)

    @staticmethod
    def backward(ctx: Any, dout_BHqSDv: Any) -> tuple[Any, ...]:
        q_BHqSD, k_BHkvTD, v_BHkvTDv, out_BHqSDv, lse_BHqS, mask_ST = ctx.saved_tensors
        dq_BHqSD, dk_BHkvTD, dv_BHkvTDv = block_backward(
            dout_BHqSDv, q_BHqSD, k_BHkvTD, v_BHkvTDv, out_BHqSDv, lse_BHqS, mask_ST, ctx.scale
        )
        dk_BHkvSD = reduce_scatter_seq(dk_BHkvTD, ctx.group)  # fp32: summed before rounding
        dv_BHkvSDv = reduce_scatter_seq(dv_BHkvTDv, ctx.group)
        return (
            dq_BHqSD.to(q_BHqSD.dtype),
            dk_BHkvSD.to(ctx.kv_dtype),
            dv_BHkvSDv.to(ctx.kv_dtype),
            None,
            None,
            None,
            None,
        )


def all_gather_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    group: Any,
    causal: bool,
    load_balance: bool,
    layout: Layout = "bshd",
    scale: float | None = None,
) -> Any:
    """All-gather attention of this rank's shard; tokens laid out by `SequenceBalancer`.

    `q`, `k`, `v` are local shards in `layout`; the result is this rank's output shard.
    """
    _, size = group_rank_and_size(group)

    def attend(q_BHqSD: Any, k_BHkvSD: Any, v_BHkvSDv: Any, scale_: float, _: Any) -> Any:
        return _AllGatherAttention.apply(
            q_BHqSD, k_BHkvSD, v_BHkvSDv, group, causal, load_balance, scale_
        )

    return attend_in_layout(
        q,
        k,
        v,
        layout=layout,
        cp_size=size,
        load_balance=load_balance,
        scale=scale,
        attend=attend,
    )
