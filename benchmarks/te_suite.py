"""A TransformerEngine-shaped CP test file, written out for the batching benchmark.

TE's `test_fused_attn_with_cp.py` parametrizes one test over dtypes, model configs, QKV formats,
CP communication types and the number of GPUs, takes the world size from the `num_gpus`
parameter, skips about half the combinations inside the body (unsupported pairings) and a few
more by marks, and launches torchrun on a worker script for the rest. This file keeps that shape
(the same counts, the same kinds of skip) with a small gloo body, so it measures what cpci adds:
start-up, scheduling and per-config overhead.
"""

from __future__ import annotations

#: 3 dtypes x 3 models x 3 formats x 4 comm types x 3 fp8 recipes x 2 world sizes = 648 configs;
#: the body skips 54% of them (fp8 recipes without fp8, THD with the gathering comm types).
TE_SUITE = """
import time

import pytest
import torch
import torch.distributed as dist

DTYPES = ["bf16", "fp16", "fp8"]
MODELS = ["cp_1_0", "cp_1_1", "cp_2_0"]
FP8_RECIPES = [None, "delayed", "current"]
FORMATS = ["bshd", "sbhd", "thd"]
COMM_TYPES = ["p2p", "all_gather", "a2a", "a2a+p2p"]


@pytest.mark.cpci(world_size="num_gpus")
@pytest.mark.parametrize("num_gpus", [2, 4])
@pytest.mark.parametrize("fp8_recipe", FP8_RECIPES)
@pytest.mark.parametrize("cp_comm_type", COMM_TYPES)
@pytest.mark.parametrize("qkv_format", FORMATS)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cp_with_fused_attention(
    dtype, model, qkv_format, cp_comm_type, fp8_recipe, num_gpus, cpci_dist
):
    start = time.perf_counter()
    if fp8_recipe is not None and dtype != "fp8":
        pytest.skip(f"fp8 recipe {fp8_recipe} needs dtype fp8")
    if qkv_format == "thd" and cp_comm_type in ("all_gather", "a2a+p2p"):
        pytest.skip(f"{cp_comm_type} does not support THD format")
    q = torch.randn(2, 4, 64, 16)  # batch, heads, this rank's sequence chunk, head dim
    k = q.clone()
    gathered = [torch.empty_like(k) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, k)  # every rank's keys, as all-gather CP does
    scores = q @ torch.cat(gathered, dim=2).transpose(-1, -2)
    assert torch.isfinite(scores).all()
    if dist.get_rank() == 0:  # rank 0's own body, inside rank 0's recorded duration
        cpci_dist.record_metric("body_s", time.perf_counter() - start)
"""
