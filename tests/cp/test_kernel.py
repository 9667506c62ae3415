"""Single-process checks of the block math every algorithm is built from, against SDPA.

No process group here: the ring and all-gather schedules are replayed in one process over the
shards a `SequenceBalancer` would give each rank, so a wrong mask or merge fails here first.

Legend: B batch, H heads, S full sequence, L local shard, D head dim.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.prerequisites import import_or_skip

torch = import_or_skip("torch", "torch", "the CP reference runs on torch")
F = torch.nn.functional

from cpci.cp.balancer import SequenceBalancer  # noqa: E402
from cpci.cp.kernel import (  # noqa: E402
    LocalAttention,
    block_backward,
    block_forward,
    causal_mask,
    empty_partial,
    merge_partials,
)
from cpci.cp.p2p import ring_step  # noqa: E402

SCALE = 8**-0.5


def inputs(seq: int = 16, heads_kv: int = 4) -> tuple[Any, Any, Any, Any]:
    gen = torch.Generator().manual_seed(0)
    q_BHSD = torch.randn(2, 4, seq, 8, generator=gen, dtype=torch.float64)
    k_BHSD, v_BHSD = (
        torch.randn(2, heads_kv, seq, 8, generator=gen, dtype=torch.float64) for _ in range(2)
    )
    dout_BHSD = torch.randn(2, 4, seq, 8, generator=gen, dtype=torch.float64)
    return q_BHSD, k_BHSD, v_BHSD, dout_BHSD


def sdpa(q: Any, k: Any, v: Any, dout: Any, causal: bool) -> tuple[Any, ...]:
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    out = F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1]
    )
    out.backward(dout)
    return out.detach(), q.grad, k.grad, v.grad


def close(actual: Any, expected: Any) -> None:
    # float64 inputs, fp32 kernel: agreement to fp32 rounding of O(1) values.
    torch.testing.assert_close(actual.double(), expected, atol=2e-6, rtol=2e-6)


@pytest.mark.parametrize("heads_kv", [4, 2, 1])
@pytest.mark.parametrize("causal", [True, False])
def test_block_forward_backward_equal_sdpa(causal: bool, heads_kv: int) -> None:
    q, k, v, dout = inputs(heads_kv=heads_kv)
    pos_S = torch.arange(16)
    mask = causal_mask(pos_S, pos_S) if causal else None
    out, lse = block_forward(q, k, v, mask, SCALE)
    grads = block_backward(dout, q, k, v, out, lse, mask, SCALE)
    expected = sdpa(q, k, v, dout, causal)
    for actual, want in zip((out, *grads), expected, strict=True):
        close(actual, want)


def test_merge_of_key_blocks_equals_full_attention() -> None:
    q, k, v, _ = inputs()
    out, lse = empty_partial(q, 8)
    for cols in (slice(0, 3), slice(3, 11), slice(11, 16)):
        part = block_forward(q, k[:, :, cols], v[:, :, cols], None, SCALE)
        out, lse = merge_partials(out, lse, *part)
    full_out, full_lse = block_forward(q, k, v, None, SCALE)
    close(out, full_out.double())
    close(lse, full_lse.double())


def test_fully_masked_rows_do_not_contribute() -> None:
    q, k, v, _ = inputs()
    nothing = torch.zeros(16, 16, dtype=torch.bool)
    out_b, lse_b = block_forward(q, k, v, nothing, SCALE)
    assert torch.isneginf(lse_b).all()
    assert not out_b.isnan().any()
    full = block_forward(q, k, v, None, SCALE)
    merged, _ = merge_partials(*full, out_b, lse_b)
    close(merged, full[0].double())


def _half(x: Any, half: int | None) -> Any:
    return x if half is None else x.chunk(2, dim=2)[half]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("load_balance", [True, False])
@pytest.mark.parametrize("cp", [2, 4])
def test_ring_schedule_equals_sdpa(cp: int, load_balance: bool, causal: bool) -> None:
    """Replay every rank's ring steps (forward merge and backward sums) in one process."""
    q, k, v, dout = inputs(seq=32, heads_kv=2)
    balancer = SequenceBalancer(32, cp, head_tail=load_balance)
    shard = [
        {n: x[:, :, balancer.positions(r)] for n, x in zip("qkvd", (q, k, v, dout), strict=True)}
        for r in range(cp)
    ]
    want_out, want_dq, want_dk, want_dv = sdpa(q, k, v, dout, causal)
    dk_total, dv_total = torch.zeros_like(k), torch.zeros_like(v)
    for rank in range(cp):
        mine, seq = shard[rank], balancer.local_len
        out, lse = empty_partial(mine["q"], 8)
        steps = []
        for i in range(cp):
            src = (rank - i) % cp
            step = ring_step(rank, src, causal=causal, load_balance=load_balance)
            if step is None:
                continue
            rows = (
                slice(None)
                if step.q_half is None
                else slice(step.q_half * seq // 2, (step.q_half + 1) * seq // 2)
            )
            cols = (
                slice(None)
                if step.kv_half is None
                else slice(step.kv_half * seq // 2, (step.kv_half + 1) * seq // 2)
            )
            mask = causal_mask(torch.arange(seq), torch.arange(seq)) if step.diagonal else None
            steps.append((src, rows, cols, mask))
            part = block_forward(
                mine["q"][:, :, rows],
                shard[src]["k"][:, :, cols],
                shard[src]["v"][:, :, cols],
                mask,
                SCALE,
            )
            out[:, :, rows], lse[:, :, rows] = merge_partials(
                out[:, :, rows], lse[:, :, rows], *part
            )
        close(out, want_out[:, :, balancer.positions(rank)])
        dq = torch.zeros_like(mine["q"])
        for src, rows, cols, mask in steps:
            pos = balancer.positions(src)[cols]
            g = block_backward(
                mine["d"][:, :, rows],
                mine["q"][:, :, rows],
                shard[src]["k"][:, :, cols],
                shard[src]["v"][:, :, cols],
                out[:, :, rows],
                lse[:, :, rows],
                mask,
                SCALE,
            )
            dq[:, :, rows] += g[0].double()
            dk_total[:, :, pos] += g[1].double()
            dv_total[:, :, pos] += g[2].double()
        close(dq, want_dq[:, :, balancer.positions(rank)])
    close(dk_total, want_dk)
    close(dv_total, want_dv)


@pytest.mark.parametrize("load_balance", [True, False])
def test_all_gather_mask_on_global_positions(load_balance: bool) -> None:
    q, k, v, dout = inputs(seq=16)
    balancer = SequenceBalancer(16, 4, head_tail=load_balance)
    order = balancer.shard_indices()  # all-gather returns shards in rank-major order
    want_out = sdpa(q, k, v, dout, True)[0]
    for rank in range(4):
        mask = causal_mask(balancer.positions(rank), order)
        out, _ = block_forward(
            q[:, :, balancer.positions(rank)], k[:, :, order], v[:, :, order], mask, SCALE
        )
        close(out, want_out[:, :, balancer.positions(rank)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_local_attention_autograd(dtype: Any) -> None:
    q, k, v, dout = (x.to(dtype) for x in inputs(heads_kv=1))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    pos_S = torch.arange(16)
    out = LocalAttention.apply(*leaves, causal_mask(pos_S, pos_S), SCALE)
    out.backward(dout)
    assert out.dtype == dtype
    assert all(x.grad.dtype == dtype for x in leaves)
    q64, k64, v64, dout64 = (x.double() for x in (q, k, v, dout))
    expected = sdpa(q64, k64, v64, dout64, True)
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # one bf16 rounding of O(1) values
    for actual, want in zip((out, *(x.grad for x in leaves)), expected, strict=True):
        torch.testing.assert_close(actual.double(), want, atol=tol, rtol=tol)
