"""Other CP stacks behind the harness's `fn(q, k, v) -> out` shape, checked by the same oracle.

- `torch_cp`: PyTorch's own CP on the path torchtitan uses (`_context_parallel_shard` with the
  head-tail balancer, the `_ContextParallel` plan), in `cpci.cp.torch_cp`; version-gated, CUDA
  only. (The earlier adapter drove the private dispatcher internals of `context_parallel()`;
  it is gone: torchtitan no longer takes that path, so testing it proved nothing about theirs.)
- `te_p2p`, `te_all_gather`, `te_a2a`: TransformerEngine's `DotProductAttention` with a CP group
  and that communication type, when TE is importable on a GPU.

Each adapter says why it cannot run a config (a skip reason) instead of failing on it.

Legend: B batch, S local sequence, H heads, D head dim.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from cpci.cp import torch_cp
from cpci.cp.harness import CaseSpec, Prepared


@dataclass(frozen=True)
class Adapter:
    """A foreign CP implementation: why it cannot run a config (None if it can), and how to."""

    name: str
    why_not: Callable[[CaseSpec, Any], str | None]
    prepare: Callable[[CaseSpec, Any], Prepared]


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
    "torch_cp": Adapter("torch_cp", torch_cp.why_not, torch_cp.prepare),
    **{
        f"te_{comm}": Adapter(f"te_{comm}", _te_why_not, _te_prepare(comm))
        for comm in ("p2p", "all_gather", "a2a")
    },
}
