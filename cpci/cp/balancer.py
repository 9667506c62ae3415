"""Which tokens each CP rank holds: head-tail ("zig-zag") load balancing or contiguous chunks.

With a causal mask, token t attends to t + 1 keys, so contiguous chunks give the last rank
about 2*cp - 1 times the work of the first. Head-tail cuts the sequence into 2*cp chunks and
gives rank r chunks r and 2*cp-1-r: every rank then holds one cheap and one expensive chunk,
and the per-rank work is equal. Every algorithm in `cpci.cp` reads the layout from here.

Legend: S global sequence length, L local shard length (S // cp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class SequenceBalancer:
    """The token layout over `cp_size` ranks of a sequence of `seq_len` tokens."""

    seq_len: int
    cp_size: int
    head_tail: bool = True

    def __post_init__(self) -> None:
        if self.cp_size < 1:
            raise ValueError(f"cp size must be >= 1, got {self.cp_size}")
        if self.seq_len < 1 or self.seq_len % self.num_chunks != 0:
            rule = "2*cp" if self.head_tail else "cp"
            raise ValueError(
                f"sequence length must be a positive multiple of {rule} = {self.num_chunks} "
                f"({'head-tail' if self.head_tail else 'contiguous'} layout), got {self.seq_len}"
            )

    @property
    def num_chunks(self) -> int:
        """How many equal chunks the sequence is cut into."""
        return 2 * self.cp_size if self.head_tail else self.cp_size

    @property
    def local_len(self) -> int:
        """Tokens per rank."""
        return self.seq_len // self.cp_size

    def chunk_ids(self, rank: int) -> tuple[int, ...]:
        """The chunks `rank` holds, in local order (always increasing)."""
        self._check_rank(rank)
        if self.head_tail:
            return (rank, self.num_chunks - 1 - rank)
        return (rank,)

    def positions(self, rank: int) -> Any:
        """Global positions of the tokens `rank` holds, in local order (e.g. for RoPE)."""
        size = self.seq_len // self.num_chunks
        return torch.cat([torch.arange(c * size, (c + 1) * size) for c in self.chunk_ids(rank)])

    def shard_indices(self) -> Any:
        """Permutation of the global sequence into rank-major order: rank 0's tokens first."""
        return torch.cat([self.positions(r) for r in range(self.cp_size)])

    def restore_indices(self) -> Any:
        """Inverse of `shard_indices`: `gathered[restore_indices()]` is the original order."""
        return torch.argsort(self.shard_indices())

    def shard(self, x: Any, dim: int, rank: int) -> Any:
        """The part of a full-sequence tensor `x` that `rank` holds (sequence along `dim`)."""
        if x.shape[dim] != self.seq_len:
            raise ValueError(
                f"tensor has {x.shape[dim]} tokens along dim {dim}, balancer expects {self.seq_len}"
            )
        return x.index_select(dim, self.positions(rank).to(x.device))

    def unshard(self, x_local: Any, dim: int, group: Any = None) -> Any:
        """The full sequence, in original order, from every rank's shard (a collective)."""
        world = dist.get_world_size(group)
        if world != self.cp_size:
            raise ValueError(f"group has {world} ranks, balancer expects cp = {self.cp_size}")
        parts = [torch.empty_like(x_local) for _ in range(world)]
        dist.all_gather(parts, x_local.contiguous(), group=group)
        return self.restore(torch.cat(parts, dim=dim), dim)

    def restore(self, gathered: Any, dim: int) -> Any:
        """Reorder a rank-major concatenation of all shards into the original sequence order."""
        return gathered.index_select(dim, self.restore_indices().to(gathered.device))

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.cp_size:
            raise ValueError(f"rank must be in [0, {self.cp_size}), got {rank}")
