"""PyTorch's own context parallelism, driven the way torchtitan drives it, behind the harness.

torchtitan moved off `context_parallel()`'s monkey-patching of `F.scaled_dot_product_attention`
to the module-wrapper path of `torch.distributed.tensor.experimental._attention`:
- `_context_parallel_shard(mesh, buffers, seq_dims, load_balancer=_HeadTailLoadBalancer(...))`
  shards the full-sequence buffers (head-tail: rank r holds chunks r and 2*cp-1-r, our layout);
- `parallelize_module(attention, mesh, _ContextParallel(seq_dim=2, attention_type=SDPA))` turns
  the attention module's q, k, v into sequence-sharded DTensors;
- `_enable_context_parallel_dispatcher()` routes SDPA on those DTensors to the ring kernels.
This adapter does exactly that, so a torch upgrade that breaks torchtitan's CP breaks here first.

The names are private and move between releases, so the adapter is version-gated: on a torch
without one of them it skips, naming the symbol and the torch version. The ring only exists for
the CUDA flash/efficient/cuDNN ops; torch has no CP sharding strategy for the CPU flash op
(`_scaled_dot_product_flash_attention_for_cpu`), so on CPU it skips too. The sharding half does
run on CPU: `cpci/suites/cp/test_adapters.py` checks it against `SequenceBalancer`.

Legend: B batch, S local sequence, H heads, D head dim.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from cpci.cp.backend import attention_policy
from cpci.cp.harness import CaseSpec, Prepared
from cpci.cp.shapes import from_bhsd, to_bhsd

MODULE = "torch.distributed.tensor.experimental._attention"
SYMBOLS = (
    "_context_parallel_shard",
    "_HeadTailLoadBalancer",
    "_ContextParallel",
    "_enable_context_parallel_dispatcher",
    "_disable_context_parallel_dispatcher",
)


@dataclass(frozen=True)
class TorchCP:
    """The pieces of torch's CP API this adapter uses, looked up once (see `load`)."""

    context_parallel_shard: Any
    head_tail_balancer: Any
    context_parallel_style: Any
    enable_dispatcher: Any
    disable_dispatcher: Any


def load() -> TorchCP | str:
    """torch's CP API, or why this torch lacks it (the missing symbol and the torch version)."""
    try:
        module = importlib.import_module(MODULE)
    except ImportError as exc:
        return f"torch {torch.__version__} has no {MODULE} ({exc})"
    missing = [name for name in SYMBOLS if not hasattr(module, name)]
    if missing:
        return (
            f"torch {torch.__version__} lacks {MODULE}.{missing[0]} "
            f"(the CP path torchtitan uses); upgrade torch to run the torch_cp configs"
        )
    return TorchCP(*(getattr(module, name) for name in SYMBOLS))


def why_not(spec: CaseSpec, device: Any) -> str | None:
    """Why torch's CP cannot run `spec` on `device`, or None when it can."""
    api = load()
    if isinstance(api, str):
        return api
    if torch.device(device).type != "cuda":
        return (
            f"PyTorch context parallelism needs CUDA: torch {torch.__version__} has no CP "
            "sharding strategy for the CPU flash attention op"
        )
    if spec.load_balance and not spec.causal:
        return "PyTorch's ring refuses load balancing without is_causal=True"
    if spec.heads_q != spec.heads_kv:
        return "PyTorch's ring SDPA kernels take equal query and key/value heads (no GQA)"
    return None


class _Attention(nn.Module):
    """The module `_ContextParallel` wraps: SDPA over BHSD tensors, as in torchtitan's models."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q_BHSD: Any, k_BHSD: Any, v_BHSD: Any) -> Any:
        return F.scaled_dot_product_attention(q_BHSD, k_BHSD, v_BHSD, is_causal=self.causal)


def mesh_for(group: Any, device: Any) -> Any:
    """A 1-D device mesh over `group` (the world when None), as CP takes it."""
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(group or dist.group.WORLD, device_type=torch.device(device).type)


def sharder(api: TorchCP, spec: CaseSpec, mesh: Any, device: Any) -> Any:
    """`shard(buffers, seq_dim)`: this rank's shards, cut by `_context_parallel_shard`."""

    def shard(buffers: list[Any], seq_dim: int) -> list[Any]:
        balancer = (
            api.head_tail_balancer(spec.seq, mesh.size(), torch.device(device))
            if spec.load_balance
            else None
        )
        shards: list[Any] = api.context_parallel_shard(
            mesh, buffers, [seq_dim] * len(buffers), load_balancer=balancer
        )
        return shards

    return shard


def prepare(spec: CaseSpec, group: Any) -> Prepared:
    """The CP function for `spec`: torch shards the buffers and runs the ring, torchtitan-style."""
    api = load()
    if isinstance(api, str):
        raise RuntimeError(api)  # why_not said so first; reaching here is a caller's bug
    from torch.distributed.tensor.parallel import parallelize_module

    device = torch.device("cuda", torch.cuda.current_device())
    mesh = mesh_for(group, device)
    style = api.context_parallel_style(
        seq_dim=2, attention_type=api.context_parallel_style.AttentionType.SDPA
    )
    attention = parallelize_module(_Attention(spec.causal), mesh, style)

    @contextlib.contextmanager
    def around() -> Iterator[None]:
        # The policy here too, not only in the harness: whoever drives this adapter, torch's
        # ring never reaches the cuDNN kernel that crashed under CP.
        policy = attention_policy(
            device=device, cp_size=mesh.size(), head_dim=spec.head_dim, dtype=spec.dtype
        )
        with policy:
            api.enable_dispatcher()
            try:
                yield
            finally:
                api.disable_dispatcher()

    def fn(q: Any, k: Any, v: Any) -> Any:
        q_BHSD, k_BHSD, v_BHSD = (to_bhsd(x, spec.layout) for x in (q, k, v))
        return from_bhsd(attention(q_BHSD, k_BHSD, v_BHSD), spec.layout)

    return Prepared(fn, around, shard=sharder(api, spec, mesh, device))
