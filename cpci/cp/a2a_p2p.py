"""Hierarchical ("a2a+p2p") context-parallel attention: cp = a2a size x p2p size.

Inside an a2a group (fast links, e.g. one node) heads are split by all-to-all; across groups
(slow links) the gathered sequences go around a ring. CP rank = p * A + a for member a of a2a
group p. Tokens use the same `SequenceBalancer` over the whole cp as every other algorithm; after
the all-to-all and the sort by position, a2a group p holds exactly p2p-level chunks p and 2P-1-p
(head-tail) or chunk p (contiguous), which is the layout the ring's masking expects.

Legend: B batch, Hq/Hkv query/key-value heads, S local sequence, T a2a-gathered sequence,
A a2a size, P p2p size, D head dim, Dv value head dim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from cpci.cp.a2a import ulysses
from cpci.cp.balancer import SequenceBalancer
from cpci.cp.comm import group_rank_and_size
from cpci.cp.p2p import ring_attention_bhsd
from cpci.cp.shapes import AttentionShape, Layout, attend_in_layout


def hierarchical_groups(
    a2a_size: int,
    *,
    rank: int,
    ranks: Sequence[int],
    new_group: Callable[[list[int]], Any] = dist.new_group,
) -> tuple[Any, Any]:
    """This rank's (a2a group, p2p group) over the CP ranks `ranks` (global ranks, CP order).

    A collective: every rank of the world must call it with the same arguments, since every
    group is created everywhere (pass `cpci_dist.new_group` in tests).
    """
    cp = len(ranks)
    if a2a_size < 1 or cp % a2a_size != 0:
        raise ValueError(f"a2a size must divide the cp size {cp}, got {a2a_size}")
    p2p_size = cp // a2a_size
    mine: dict[str, Any] = {}
    for p in range(p2p_size):
        members = [ranks[p * a2a_size + a] for a in range(a2a_size)]
        group = new_group(members)
        if rank in members:
            mine["a2a"] = group
    for a in range(a2a_size):
        members = [ranks[p * a2a_size + a] for p in range(p2p_size)]
        group = new_group(members)
        if rank in members:
            mine["p2p"] = group
    return mine.get("a2a"), mine.get("p2p")


def a2a_p2p_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    a2a_group: Any,
    p2p_group: Any,
    causal: bool,
    load_balance: bool,
    layout: Layout = "bshd",
    scale: float | None = None,
) -> Any:
    """Hierarchical attention of this rank's shard over cp = a2a size x p2p size ranks.

    Query heads must be divisible by the a2a size. The result is this rank's output shard.
    """
    _, a2a_size = group_rank_and_size(a2a_group)
    p, p2p_size = group_rank_and_size(p2p_group)
    cp = a2a_size * p2p_size

    def attend(
        q_BHqSD: Any, k_BHkvSD: Any, v_BHkvSDv: Any, scale_: float, shape: AttentionShape
    ) -> Any:
        seq = shape.seq_local * cp
        balancer = SequenceBalancer(seq, cp, head_tail=load_balance)
        cp_ranks = [p * a2a_size + j for j in range(a2a_size)]
        ring_layout = SequenceBalancer(seq, p2p_size, head_tail=load_balance)
        gathered_T = torch.cat([balancer.positions(r) for r in cp_ranks]).sort().values
        assert torch.equal(gathered_T, ring_layout.positions(p)), "a2a groups hold ring chunks"

        def ring(q_BHTD: Any, k_BHTD: Any, v_BHTDv: Any) -> Any:
            return ring_attention_bhsd(
                q_BHTD,
                k_BHTD,
                v_BHTDv,
                group=p2p_group,
                causal=causal,
                load_balance=load_balance,
                scale=scale_,
            )

        return ulysses(
            q_BHqSD,
            k_BHkvSD,
            v_BHkvSDv,
            group=a2a_group,
            balancer=balancer,
            cp_ranks=cp_ranks,
            inner=ring,
        )

    return attend_in_layout(
        q,
        k,
        v,
        layout=layout,
        cp_size=cp,
        load_balance=load_balance,
        scale=scale,
        attend=attend,
        head_split=a2a_size,
    )
