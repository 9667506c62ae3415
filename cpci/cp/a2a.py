"""All-to-all ("Ulysses") context-parallel attention: trade the sequence shard for a head shard.

An all-to-all turns "my S tokens of all H heads" into "all N*S tokens of H/N heads", attention
runs on whole sequences of fewer heads, and a second all-to-all turns the output back. Heads must
divide by the a2a size; K/V heads of GQA/MQA are repeated first when they do not (the gradients of
the copies are summed back by autograd). The gathered tokens come in rank-major order; they are
sorted by global position so the causal mask inside is a plain triangle. `ulysses` is also the
outer half of a2a+p2p, where the attention inside is itself a ring.

Legend: B batch, Hq/Hkv query/key-value heads, S local sequence, T gathered sequence (N * S),
N a2a size, D head dim, Dv value head dim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from cpci.cp.balancer import SequenceBalancer
from cpci.cp.comm import group_rank_and_size, heads_to_seq, seq_to_heads
from cpci.cp.kernel import LocalAttention, causal_mask, expand_kv
from cpci.cp.shapes import AttentionShape, Layout, attend_in_layout

InnerAttention = Callable[[Any, Any, Any], Any]


def ulysses(
    q_BHqSD: Any,
    k_BHkvSD: Any,
    v_BHkvSDv: Any,
    *,
    group: Any,
    balancer: SequenceBalancer,
    cp_ranks: list[int],
    inner: InnerAttention,
) -> Any:
    """Attention through an all-to-all over `group`; `inner` sees head-sharded, position-sorted
    BHTD tensors. `cp_ranks[j]` is the CP rank (for `balancer`) of the group's j-th member."""
    _, n = group_rank_and_size(group)
    heads_kv = k_BHkvSD.shape[1]
    repeat = n // math.gcd(heads_kv, n)  # K/V heads become a multiple of n
    k_BHkvSD, v_BHkvSDv = expand_kv(k_BHkvSD, repeat), expand_kv(v_BHkvSDv, repeat)
    positions_T = torch.cat([balancer.positions(r) for r in cp_ranks])
    order_T = torch.argsort(positions_T).to(q_BHqSD.device)
    q_BHTD, k_BHTD, v_BHTDv = (
        seq_to_heads(x, group).index_select(2, order_T) for x in (q_BHqSD, k_BHkvSD, v_BHkvSDv)
    )
    out_BHTDv = inner(q_BHTD, k_BHTD, v_BHTDv).index_select(2, torch.argsort(order_T))
    return heads_to_seq(out_BHTDv, group)


def a2a_attention(
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
    """Ulysses attention of this rank's shard; tokens laid out by `SequenceBalancer`.

    Query heads must be divisible by the group size. The result is this rank's output shard.
    """
    _, size = group_rank_and_size(group)

    def attend(
        q_BHqSD: Any, k_BHkvSD: Any, v_BHkvSDv: Any, scale_: float, shape: AttentionShape
    ) -> Any:
        seq = shape.seq_local * size

        def local(q_BHTD: Any, k_BHTD: Any, v_BHTDv: Any) -> Any:
            pos_T = torch.arange(seq, device=q_BHTD.device)
            mask_TT = causal_mask(pos_T, pos_T) if causal else None
            return LocalAttention.apply(q_BHTD, k_BHTD, v_BHTDv, mask_TT, scale_)

        return ulysses(
            q_BHqSD,
            k_BHkvSD,
            v_BHkvSDv,
            group=group,
            balancer=SequenceBalancer(seq, size, head_tail=load_balance),
            cp_ranks=list(range(size)),
            inner=local,
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
        head_split=size,
    )
