"""Ring ("p2p") context-parallel attention: K/V blocks travel around the ring.

At step i, rank r holds the K/V of rank src = r - i. It computes attention of its queries
against that block while the block moves on to rank r + 1 (batched send/recv, overlapped with the
compute), and merges the partial result with log-sum-exp. In the backward the K/V blocks travel
the same way, each with an fp32 dK/dV accumulator that every rank adds its share to; after a full
turn the accumulator comes home to the block's owner.

Causal masking follows the token layout (`SequenceBalancer`):
- step 0 (the diagonal): causal over the local tokens (local order is increasing);
- head-tail, src < r: every local query sees the first chunk of src fully, its second not at all;
- head-tail, src > r: only the second local chunk sees src, and sees both of its chunks fully;
- contiguous, src < r: full; src > r: nothing (the work imbalance head-tail removes).

Legend: B batch, Hq/Hkv query/key-value heads, S local sequence, D head dim, Dv value head dim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cpci.cp.comm import group_rank_and_size, ring_shift
from cpci.cp.kernel import block_backward, block_forward, causal_mask, empty_partial, merge_partials
from cpci.cp.shapes import Layout, attend_in_layout


@dataclass(frozen=True)
class RingStep:
    """What one ring step computes. `q_half`/`kv_half`: None for all local tokens, 0 or 1 for
    the first or second half (chunk); `diagonal`: causal mask over local tokens, else full."""

    q_half: int | None
    kv_half: int | None
    diagonal: bool


def ring_step(rank: int, src: int, *, causal: bool, load_balance: bool) -> RingStep | None:
    """The block rank `rank` computes against the K/V of rank `src`; None if nothing is visible."""
    if not causal:
        return RingStep(None, None, diagonal=False)
    if src == rank:
        return RingStep(None, None, diagonal=True)
    if load_balance:
        return RingStep(None, 0, False) if src < rank else RingStep(1, None, False)
    return RingStep(None, None, False) if src < rank else None


def _half(x_BHSD: Any, half: int | None) -> Any:
    return x_BHSD if half is None else x_BHSD.chunk(2, dim=2)[half]


def _rows(half: int | None, seq: int) -> slice:
    return slice(None) if half is None else slice(half * seq // 2, (half + 1) * seq // 2)


def _mask(step: RingStep, seq: int, device: Any) -> Any:
    if not step.diagonal:
        return None
    pos_S = torch.arange(seq, device=device)
    return causal_mask(pos_S, pos_S)


class _RingAttention(torch.autograd.Function):
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
        seq = q_BHqSD.shape[2]
        out_BHqSDv, lse_BHqS = empty_partial(q_BHqSD, v_BHkvSDv.shape[-1])
        k_cur, v_cur = k_BHkvSD, v_BHkvSDv
        for i in range(size):
            transfer = ring_shift([k_cur, v_cur], group) if i < size - 1 else None
            step = ring_step(rank, (rank - i) % size, causal=causal, load_balance=load_balance)
            if step is not None:
                rows = _rows(step.q_half, seq)
                part_out, part_lse = block_forward(
                    _half(q_BHqSD, step.q_half),
                    _half(k_cur, step.kv_half),
                    _half(v_cur, step.kv_half),
                    _mask(step, seq, q_BHqSD.device),
                    scale,
                )
                out_BHqSDv[:, :, rows], lse_BHqS[:, :, rows] = merge_partials(
                    out_BHqSDv[:, :, rows], lse_BHqS[:, :, rows], part_out, part_lse
                )
            if transfer is not None:
                k_cur, v_cur = transfer.wait()
        ctx.save_for_backward(q_BHqSD, k_BHkvSD, v_BHkvSDv, out_BHqSDv, lse_BHqS)
        ctx.group, ctx.causal, ctx.load_balance, ctx.scale = group, causal, load_balance, scale
        return out_BHqSDv.to(q_BHqSD.dtype)

    @staticmethod
    def backward(ctx: Any, dout_BHqSDv: Any) -> tuple[Any, ...]:
        q_BHqSD, k_BHkvSD, v_BHkvSDv, out_BHqSDv, lse_BHqS = ctx.saved_tensors
        rank, size = group_rank_and_size(ctx.group)
        seq = q_BHqSD.shape[2]
        dout_BHqSDv = dout_BHqSDv.float()
        delta_BHqS = (dout_BHqSDv * out_BHqSDv).sum(-1)
        dq_BHqSD = torch.zeros_like(q_BHqSD, dtype=torch.float32)
        k_cur, v_cur = k_BHkvSD, v_BHkvSDv
        dkv_transfer = None
        for i in range(size):
            kv_transfer = ring_shift([k_cur, v_cur], ctx.group) if i < size - 1 else None
            dk_cur = torch.zeros_like(k_cur, dtype=torch.float32)
            dv_cur = torch.zeros_like(v_cur, dtype=torch.float32)
            step = ring_step(
                rank, (rank - i) % size, causal=ctx.causal, load_balance=ctx.load_balance
            )
            if step is not None:
                rows, cols = _rows(step.q_half, seq), _rows(step.kv_half, seq)
                dq, dk, dv = block_backward(
                    dout_BHqSDv[:, :, rows],
                    q_BHqSD[:, :, rows],
                    k_cur[:, :, cols],
                    v_cur[:, :, cols],
                    out_BHqSDv[:, :, rows],
                    lse_BHqS[:, :, rows],
                    _mask(step, seq, q_BHqSD.device),
                    ctx.scale,
                    delta_BHqS[:, :, rows],
                )
                dq_BHqSD[:, :, rows] += dq
                dk_cur[:, :, cols] += dk
                dv_cur[:, :, cols] += dv
            if dkv_transfer is not None:  # the accumulator of this block, from rank - 1
                dk_prev, dv_prev = dkv_transfer.wait()
                dk_cur += dk_prev
                dv_cur += dv_prev
            dkv_transfer = ring_shift([dk_cur, dv_cur], ctx.group)
            if kv_transfer is not None:
                k_cur, v_cur = kv_transfer.wait()
        assert dkv_transfer is not None
        dk_BHkvSD, dv_BHkvSDv = dkv_transfer.wait()  # our own block's, after a full turn
        return (
            dq_BHqSD.to(q_BHqSD.dtype),
            dk_BHkvSD.to(k_BHkvSD.dtype),
            dv_BHkvSDv.to(v_BHkvSDv.dtype),
            None,
            None,
            None,
            None,
        )


def ring_attention_bhsd(
    q_BHqSD: Any,
    k_BHkvSD: Any,
    v_BHkvSDv: Any,
    *,
    group: Any,
    causal: bool,
    load_balance: bool,
    scale: float,
) -> Any:
    """Ring attention on BHSD shards, inputs already checked (also the inner step of a2a+p2p)."""
    return _RingAttention.apply(q_BHqSD, k_BHkvSD, v_BHkvSDv, group, causal, load_balance, scale)


def p2p_attention(
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
    """Ring attention of this rank's shard; tokens laid out by `SequenceBalancer(load_balance)`.

    `q`, `k`, `v` are local shards in `layout`; the result is this rank's output shard.
    """
    _, size = group_rank_and_size(group)

    def attend(q_BHqSD: Any, k_BHkvSD: Any, v_BHkvSDv: Any, scale_: float, _: Any) -> Any:
        return ring_attention_bhsd(
            q_BHqSD,
            k_BHkvSD,
            v_BHkvSDv,
            group=group,
            causal=causal,
            load_balance=load_balance,
            scale=scale_,
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
