"""Run one CP attention config end to end and compare it with the oracle.

Every rank builds the same full-sequence inputs (from an explicit seed), takes its shard with the
`SequenceBalancer`, runs the CP function forward and backward, and gathers the output and
gradients back into full-sequence order. Then, with no collective left to run, the results are
compared with `oracle.reference_attention`. Any CP implementation with the signature
`fn(q_shard, k_shard, v_shard) -> out_shard` can be checked this way (ours, PyTorch's, TE's).

Legend: B batch, S full sequence, H heads, D head dim (tensors in the spec's layout).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cpci.cp.backend import attention_policy
from cpci.cp.balancer import SequenceBalancer
from cpci.cp.oracle import Reference, reference_attention
from cpci.cp.shapes import Layout, seq_dim

CPFunction = Callable[[Any, Any, Any], Any]
Around = Callable[[], contextlib.AbstractContextManager[Any]]
# (full-sequence buffers, their sequence dim) -> this rank's shards, in the same order.
Sharder = Callable[[list[Any], int], list[Any]]


@dataclass(frozen=True)
class Prepared:
    """A CP implementation made ready for one config: its function, what to run it inside, and
    how it shards its inputs (None: `SequenceBalancer`, the layout every stack here agrees on)."""

    fn: CPFunction
    around: Around = contextlib.nullcontext
    shard: Sharder | None = None


@dataclass(frozen=True)
class CaseSpec:
    """The shape and mode of one attention config."""

    batch: int = 2
    seq: int = 16
    heads_q: int = 4
    heads_kv: int = 4
    head_dim: int = 8
    dtype: Any = torch.float32
    layout: Layout = "bshd"
    causal: bool = True
    load_balance: bool = True

    def shape(self, heads: int) -> tuple[int, int, int, int]:
        """A full-sequence tensor's shape in this layout."""
        if self.layout == "bshd":
            return (self.batch, self.seq, heads, self.head_dim)
        return (self.seq, self.batch, heads, self.head_dim)


@dataclass(frozen=True)
class CaseInputs:
    """Full-sequence inputs, already rounded to the spec's dtype."""

    q: Any
    k: Any
    v: Any
    dout: Any


def make_inputs(spec: CaseSpec, *, device: Any = "cpu", seed: int = 0) -> CaseInputs:
    """Unit-normal inputs, the same on every rank for the same seed."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, dout = (
        torch.randn(spec.shape(h), generator=gen).to(device=device, dtype=spec.dtype)
        for h in (spec.heads_q, spec.heads_kv, spec.heads_kv, spec.heads_q)
    )
    return CaseInputs(q, k, v, dout)


def run_sharded(
    spec: CaseSpec,
    inputs: CaseInputs,
    fn: CPFunction,
    *,
    rank: int,
    cp_size: int,
    group: Any,
    around: Around = contextlib.nullcontext,
    shard: Sharder | None = None,
) -> dict[str, Any]:
    """CP forward and backward of this rank's shard; full-sequence out, dq, dk, dv (collective).

    `around` wraps both passes (a foreign CP stack may need to stay enabled for its backward).
    `shard` cuts the inputs where a stack shards its own buffers; the results are unsharded
    with `SequenceBalancer` all the same, so a stack whose layout differs fails the oracle.
    Both also run under the SDPA backend policy (`backend.attention_policy`): with cp > 1 only
    FLASH and EFFICIENT, so no CP config can reach cuDNN, whichever stack it drives.
    """
    balancer = SequenceBalancer(spec.seq, cp_size, head_tail=spec.load_balance)
    dim = seq_dim(spec.layout)
    full = [inputs.q, inputs.k, inputs.v, inputs.dout]
    if shard is None:
        q, k, v, dout = (balancer.shard(x, dim, rank) for x in full)
    else:
        q, k, v, dout = shard(full, dim)
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    policy = attention_policy(
        device=q.device, cp_size=cp_size, head_dim=spec.head_dim, dtype=spec.dtype
    )
    with policy, around():
        out = fn(q, k, v)
        out.backward(dout)
    local = {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    return {name: balancer.unshard(x, dim, group) for name, x in local.items()}


def reference_for(spec: CaseSpec, inputs: CaseInputs) -> Reference:
    """The fp32 SDPA reference for these inputs."""
    return reference_attention(
        inputs.q, inputs.k, inputs.v, inputs.dout, causal=spec.causal, layout=spec.layout
    )
