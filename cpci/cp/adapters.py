"""Other CP stacks behind the harness's `fn(q, k, v) -> out` shape, checked by the same oracle.

- `torch_cp`: PyTorch's CP dispatcher (what the public `context_parallel()` enables) on our
  shards; its head-tail layout is ours (rank r holds chunks r and 2*cp-1-r). CUDA only: torch
  has no CP sharding strategy for the CPU flash op.
- `te_p2p`, `te_all_gather`, `te_a2a`: TransformerEngine's `DotProductAttention` with a CP group
  and that communication type, when TE is importable on a GPU.

Each adapter says why it cannot run a config (a skip reason) instead of failing on it.

Legend: B batch, S local sequence, H heads, D head dim.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from cpci.cp.harness import CaseSpec, CPFunction
from cpci.cp.shapes import from_bhsd, to_bhsd

Around = Callable[[], contextlib.AbstractContextManager[None]]


@dataclass(frozen=True)
class Prepared:
    """An adapter made ready for one config: the CP function and what to run it inside."""

    fn: CPFunction
    around: Around = contextlib.nullcontext


@dataclass(frozen=True)
class Adapter:
    """A foreign CP implementation: why it cannot run a config (None if it can), and how to."""

    name: str
    why_not: Callable[[CaseSpec, Any], str | None]
    prepare: Callable[[CaseSpec, Any], Prepared]


def _torch_cp_why_not(spec: CaseSpec, device: Any) -> str | None:
    if torch.device(device).type != "cuda":
        return (
            f"PyTorch context_parallel needs CUDA: torch {torch.__version__} has no CP sharding "
            "strategy for the CPU flash attention op"
        )
    if spec.load_balance and not spec.causal:
        return "PyTorch's ring refuses load balancing without is_causal=True"
    if spec.heads_q != spec.heads_kv:
        return "PyTorch's ring SDPA kernels take equal query and key/value heads (no GQA)"
    return None


def _torch_cp_prepare(spec: CaseSpec, group: Any) -> Prepared:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp_impl

    mesh = DeviceMesh.from_group(group or dist.group.WORLD, device_type="cuda")

    @contextlib.contextmanager
    def around() -> Iterator[None]:
        # What `context_parallel()` does after sharding its buffers, minus the sharding: the
        # harness gives every rank its shard already.
        old_mode, old_balance = cp_impl._dispatch_mode, cp_impl._cp_options.enable_load_balance
        cp_impl._dispatch_mode = cp_impl._DispatchMode.MONKEY_PATCH
        cp_impl._cp_options.enable_load_balance = spec.load_balance
        cp_impl._enable_context_parallel_dispatcher_impl(seq_dim=2, mesh=mesh)
        try:
            yield
        finally:
            cp_impl._disable_context_parallel_dispatcher_impl()
            cp_impl._dispatch_mode = old_mode
            cp_impl._cp_options.enable_load_balance = old_balance

    def fn(q: Any, k: Any, v: Any) -> Any:
        q_BHSD, k_BHSD, v_BHSD = (to_bhsd(x, spec.layout) for x in (q, k, v))
        out_BHSD = F.scaled_dot_product_attention(q_BHSD, k_BHSD, v_BHSD, is_causal=spec.causal)
        return from_bhsd(out_BHSD, spec.layout)

    return Prepared(fn, around)


def _te_why_not(spec: CaseSpec, device: Any) -> str | None:
    if torch.device(device).type != "cuda":
        return "TransformerEngine attention needs a CUDA GPU"
    if importlib.util.find_spec("transformer_engine") is None:
        return "TransformerEngine is not installed"
    if spec.dtype not in (torch.float16, torch.bfloat16):
        return f"TransformerEngine's fused/flash attention needs fp16/bf16, got {spec.dtype}"
    if not spec.load_balance:
        return "TransformerEngine CP always expects the head-tail (dual-chunk) layout"
    return None


def _te_prepare(comm_type: str) -> Callable[[CaseSpec, Any], Prepared]:
    def prepare(spec: CaseSpec, group: Any) -> Prepared:
        te = importlib.import_module("transformer_engine.pytorch")  # optional, untyped

        group = group or dist.group.WORLD
        attention = te.DotProductAttention(
            num_attention_heads=spec.heads_q,
            kv_channels=spec.head_dim,
            num_gqa_groups=spec.heads_kv,
            attention_dropout=0.0,
            qkv_format=spec.layout,
            attn_mask_type="causal" if spec.causal else "no_mask",
            cp_group=group,
            cp_global_ranks=dist.get_process_group_ranks(group),
            cp_stream=torch.cuda.Stream(),
            cp_comm_type=comm_type,
        )

        def fn(q: Any, k: Any, v: Any) -> Any:
            out = attention(q, k, v)  # (B, S, H*D) or (S, B, H*D)
            return out.view(*q.shape[:2], spec.heads_q, spec.head_dim)

        return Prepared(fn)

    return prepare


ADAPTERS: dict[str, Adapter] = {
    "torch_cp": Adapter("torch_cp", _torch_cp_why_not, _torch_cp_prepare),
    **{
        f"te_{comm}": Adapter(f"te_{comm}", _te_why_not, _te_prepare(comm))
        for comm in ("p2p", "all_gather", "a2a")
    },
}
