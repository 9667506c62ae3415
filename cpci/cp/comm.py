"""The collectives CP attention needs, in one place: ring shifts, sequence all-gather and
reduce-scatter, and the sequence<->head all-to-all (with its own backward).

Tensors here are BHSD; "sequence-sharded" means each rank holds a slice of S with all heads,
"head-sharded" means each rank holds a slice of H with the whole (gathered) S.

Legend: B batch, H heads, S local sequence, D head dim, N group size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


def group_rank_and_size(group: Any) -> tuple[int, int]:
    """This rank's index in `group` and the group's size."""
    return dist.get_rank(group), dist.get_world_size(group)


def _global(group: Any, group_rank: int) -> int:
    return int(dist.get_global_rank(group or dist.group.WORLD, group_rank))


@dataclass
class RingTransfer:
    """Tensors in flight to the next rank while ours arrive from the previous one."""

    received: list[Any]
    requests: list[Any]

    def wait(self) -> list[Any]:
        """Block until this step's exchange is done; the tensors sent by the previous rank."""
        for request in self.requests:
            request.wait()
        return self.received


def ring_shift(tensors: list[Any], group: Any) -> RingTransfer:
    """Start sending `tensors` to rank+1 and receiving their counterparts from rank-1.

    Returns at once (batched isend/irecv), so the caller computes while the data travels.
    """
    rank, size = group_rank_and_size(group)
    send_to, recv_from = _global(group, (rank + 1) % size), _global(group, (rank - 1) % size)
    received = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]
    ops = [dist.P2POp(dist.isend, t.contiguous(), send_to, group) for t in tensors]
    ops += [dist.P2POp(dist.irecv, r, recv_from, group) for r in received]
    return RingTransfer(received, dist.batch_isend_irecv(ops))


def all_gather_seq(x_BHSD: Any, group: Any) -> Any:
    """Every rank's shard concatenated along S, in group-rank order."""
    _, size = group_rank_and_size(group)
    parts = [torch.empty_like(x_BHSD) for _ in range(size)]
    dist.all_gather(parts, x_BHSD.contiguous(), group=group)
    return torch.cat(parts, dim=2)


def reduce_scatter_seq(x_BHSD: Any, group: Any) -> Any:
    """Sum over ranks of a gathered-sequence tensor, each rank keeping its own slice of S."""
    rank, size = group_rank_and_size(group)
    if dist.get_backend(group) == "gloo":  # gloo has no reduce_scatter
        total = x_BHSD.contiguous()
        dist.all_reduce(total, group=group)
        return total.chunk(size, dim=2)[rank].contiguous()
    chunks = [c.contiguous() for c in x_BHSD.chunk(size, dim=2)]
    out = torch.empty_like(chunks[rank])
    dist.reduce_scatter(out, chunks, group=group)
    return out


def _seq_to_head(x_BHSD: Any, group: Any) -> Any:
    _, n = group_rank_and_size(group)
    b, h, s, d = x_BHSD.shape
    send_NBHSD = x_BHSD.reshape(b, n, h // n, s, d).transpose(0, 1).contiguous()
    recv_NBHSD = torch.empty_like(send_NBHSD)
    dist.all_to_all_single(recv_NBHSD, send_NBHSD, group=group)
    return recv_NBHSD.permute(1, 2, 0, 3, 4).reshape(b, h // n, n * s, d)


def _head_to_seq(x_BHSD: Any, group: Any) -> Any:
    _, n = group_rank_and_size(group)
    b, h, s, d = x_BHSD.shape
    send_NBHSD = x_BHSD.reshape(b, h, n, s // n, d).permute(2, 0, 1, 3, 4).contiguous()
    recv_NBHSD = torch.empty_like(send_NBHSD)
    dist.all_to_all_single(recv_NBHSD, send_NBHSD, group=group)
    return recv_NBHSD.transpose(0, 1).reshape(b, n * h, s // n, d)


class SeqHeadAllToAll(torch.autograd.Function):
    """Sequence-sharded -> head-sharded (`to_heads=True`) or back; the backward is the inverse."""

    @staticmethod
    def forward(ctx: Any, x_BHSD: Any, group: Any, to_heads: bool) -> Any:
        ctx.group, ctx.to_heads = group, to_heads
        return _seq_to_head(x_BHSD, group) if to_heads else _head_to_seq(x_BHSD, group)

    @staticmethod
    def backward(ctx: Any, grad_BHSD: Any) -> tuple[Any, None, None]:
        inverse = _head_to_seq if ctx.to_heads else _seq_to_head
        return inverse(grad_BHSD, ctx.group), None, None


def seq_to_heads(x_BHSD: Any, group: Any) -> Any:
    """All-to-all: this rank's S tokens of all H heads -> all N*S tokens of H/N heads."""
    return SeqHeadAllToAll.apply(x_BHSD, group, True)


def heads_to_seq(x_BHSD: Any, group: Any) -> Any:
    """The inverse of `seq_to_heads`."""
    return SeqHeadAllToAll.apply(x_BHSD, group, False)
